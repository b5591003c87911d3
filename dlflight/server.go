package dlflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server serves named tensors over Arrow Flight. Build it with NewServer,
// Register producers, Serve a listener, Shutdown at the end.
//
// A held tensor is released exactly once: when it is unregistered,
// replaced (Register or DoPut of the same name) or the server shuts down,
// and never while a DoGet is still sending it: a DoGet ends once gRPC has
// written the tensor's bytes. A DoGet cut off mid-stream leaves the
// buffers gRPC dropped without handing back to the garbage collector:
// the tensor's memory is freed once they become unreachable.
type Server struct {
	flight.BaseFlightServer
	opts    Options
	srv     *dlgrpc.Server
	mu      sync.Mutex
	tensors map[string]*entry
	closed  bool
	// uploads are the parallel Puts under way (s.mu).
	uploads map[string]*upload
	// stored is what peers' DoPuts make the server hold
	// (MaxStoredBytes).
	stored budget
}

// budget counts bytes against a bound.
type budget struct {
	mu        sync.Mutex
	used, max int64
}

// take counts n more bytes, unless that passes the bound.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || b.used+n > b.max || b.used+n < b.used {
		return false
	}
	b.used += n
	return true
}

// give uncounts n bytes taken.
func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *budget) load() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// entry is a held tensor: its bytes and a reference count (the map's
// and one per DoGet sending it); the last drop releases it.
type entry struct {
	l       layout
	data    []byte
	refs    atomic.Int64
	release func()
	// mapped: data lies in a file mapping (a tensorfile tensor, see
	// mappedProducer), read only through a guarded copy.
	mapped bool
	// wire: the schema and its IPC message, made at the first DoGet.
	wire atomic.Pointer[wireSchema]
	// remote, when set, are the ranges of a tensor held by other
	// servers (RegisterRemote); the entry has no data.
	remote []RemoteRange
}

// wireFor returns the entry's schema message for a column named name.
func (e *entry) wireFor(name string) *wireSchema {
	if ws := e.wire.Load(); ws != nil && ws.column == name {
		return ws
	}
	ws := e.l.wire(name)
	e.wire.Store(ws)
	return ws
}

// mappedProducer is a producer that can tell whether its tensor is a view
// of a file mapping: tensorfile's Tensor. The file may be cut short by
// another process, and a read of a lost page faults (SIGBUS), so such a
// tensor is copied into each message under a fault guard, on the sending
// goroutine, instead of being handed to gRPC's writer goroutine, where a
// fault would kill the process.
type mappedProducer interface {
	Mapped() bool
}

func (e *entry) drop() {
	if e.refs.Add(-1) == 0 && e.release != nil {
		e.release()
	}
}

// NewServer makes a Server; nothing listens until Serve.
func NewServer(opts Options) *Server {
	if opts.EndpointBytes == 0 {
		opts.EndpointBytes = DefaultEndpointBytes
	}
	if opts.MaxTensors <= 0 {
		opts.MaxTensors = DefaultMaxTensors
	}
	if opts.MaxStoredBytes <= 0 {
		opts.MaxStoredBytes = DefaultMaxStoredBytes
	}
	// the tensor's messages are checked against MaxMessageBytes by send
	// itself; gRPC's bound leaves room for a FlightInfo too
	srv := dlgrpc.NewServer("dlflight", opts.shared(), DefaultMaxMessageBytes, maxInfoBytes)
	so := srv.Options()
	opts.Logger, opts.MaxMessageBytes, opts.MaxTensorBytes, opts.MaxConcurrentCalls = so.Logger, so.MaxMessageBytes, so.MaxTensorBytes, so.MaxConcurrentCalls
	opts.StallTimeout, opts.HandshakeTimeout, opts.Allocator = so.StallTimeout, so.HandshakeTimeout, so.Allocator
	s := &Server{opts: opts, srv: srv, tensors: map[string]*entry{}, stored: budget{max: opts.MaxStoredBytes}}
	flight.RegisterFlightServiceServer(srv.GRPC(), s)
	return s
}

func (s *Server) allowed(ctx context.Context, op dlgrpc.Op, name string) error {
	return s.srv.Allowed(ctx, op, name)
}

// Register serves p's tensor under name, replacing (and releasing) any
// tensor of that name. The server takes the tensor through dlpack.From
// and holds it until it is unregistered, replaced or the server shuts
// down; p stays the caller's. It must be a compact row-major CPU tensor of
// an element type Arrow has (ErrType) and a shape fixed_shape_tensor can
// carry (ErrShape), under a name that is valid UTF-8 (ErrName); on error
// nothing is held.
func (s *Server) Register(name string, p dlpack.Producer) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("dlflight: register: %w", err)
	}
	e, err := hold(p)
	if err != nil {
		return fmt.Errorf("dlflight: register %q: %w", name, err)
	}
	return s.store(name, e, false)
}

// hold takes p's tensor as an entry.
func hold(p dlpack.Producer) (*entry, error) {
	f, err := dlpack.From(p, dlpack.RequireDevice(dlpack.CPUDevice), dlpack.RequireContiguous())
	if err != nil {
		return nil, err
	}
	l, err := layoutOf(f.DataType(), f.Shape())
	if err != nil {
		f.Close()
		return nil, err
	}
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	e := &entry{l: l, release: func() { f.Close() }}
	if mp, ok := p.(mappedProducer); ok && mp.Mapped() {
		e.mapped = true
	}
	if l.nbytes > 0 {
		e.data = b[first : first+int(l.nbytes)]
	}
	e.refs.Store(1)
	return e, nil
}

// store puts e under name; limited applies MaxTensors. On error e is
// released.
func (s *Server) store(name string, e *entry, limited bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		e.drop()
		return errors.New("dlflight: the server is shut down")
	}
	old := s.tensors[name]
	if limited && old == nil && s.opts.MaxTensors > 0 && len(s.tensors) >= s.opts.MaxTensors {
		s.mu.Unlock()
		e.drop()
		return fmt.Errorf("%w: the server holds its %d tensors", errLimit, s.opts.MaxTensors)
	}
	s.tensors[name] = e
	s.mu.Unlock()
	if old != nil {
		old.drop()
	}
	return nil
}

// Unregister stops serving name and releases its tensor (after the DoGets
// sending it end); it reports whether name was held.
func (s *Server) Unregister(name string) bool {
	s.mu.Lock()
	e := s.tensors[name]
	delete(s.tensors, name)
	s.mu.Unlock()
	if e != nil {
		e.drop()
	}
	return e != nil
}

// Names lists the held tensors' names, sorted.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// acquire finds name and takes a reference for the caller to drop.
func (s *Server) acquire(name string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tensors[name]
	if e == nil {
		return nil, status.Errorf(codes.NotFound, "dlflight: no tensor %q", name)
	}
	e.refs.Add(1)
	return e, nil
}

// Serve answers Flight calls on lis until Shutdown; it returns nil after
// Shutdown.
func (s *Server) Serve(lis net.Listener) error { return s.srv.Serve(lis) }

// Shutdown stops the server: listeners close, calls in progress are
// cancelled, and every held tensor is released. A tensor whose bytes a
// call cut off mid-stream left with gRPC, dropped without being freed,
// is released once a garbage collection finds them unreachable:
// Shutdown runs collections until that happens (for up to 10 s) rather
// than leave it to the next one, so it is normally released by the time
// Shutdown returns. Register and DoPut fail afterwards.
func (s *Server) Shutdown() {
	s.srv.Stop()
	s.mu.Lock()
	s.closed = true
	held := s.tensors
	s.tensors = map[string]*entry{}
	s.mu.Unlock()
	for _, e := range held {
		e.drop()
	}
	s.dropUploads()
	s.srv.Reclaim(reclaimWait)
}

// reclaimWait bounds how long Shutdown collects garbage to find the
// bytes gRPC dropped.
const reclaimWait = 10 * time.Second

func (s *Server) info(name string, e *entry) *flight.FlightInfo {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
	i := Info{Name: name, DType: e.l.dtype, Shape: e.l.shape, Bytes: e.l.nbytes}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(e.l.schema(name), memory.DefaultAllocator),
		FlightDescriptor: desc,
		Endpoint:         s.endpoints(name, e),
		TotalRecords:     e.l.rows,
		TotalBytes:       e.l.nbytes,
		AppMetadata:      i.appMetadata(),
	}
}

// nameOf is the tensor name of a descriptor: its one path element, or
// its command.
func nameOf(d *flight.FlightDescriptor) (string, error) {
	switch {
	case d == nil:
		return "", status.Error(codes.InvalidArgument, "dlflight: no flight descriptor")
	case d.Type == flight.DescriptorPATH && len(d.Path) == 1:
		return d.Path[0], nil
	case d.Type == flight.DescriptorCMD:
		if err := checkName(string(d.Cmd)); err != nil {
			return "", status.Error(codes.InvalidArgument, err.Error())
		}
		return string(d.Cmd), nil
	}
	return "", status.Errorf(codes.InvalidArgument, "dlflight: descriptor path %q: one name expected", d.Path)
}

// checkName refuses a name that is not valid UTF-8: ListFlights and
// GetFlightInfo answer with the name as a descriptor path, a protobuf
// string, which cannot be marshalled otherwise (one such name made every
// ListFlights fail).
func checkName(name string) error {
	if !utf8.ValidString(name) {
		return &dlpack.FieldError{Field: "name", Value: strconv.Quote(name), Err: ErrName, Why: "a Flight descriptor path is a protobuf string"}
	}
	return nil
}

// ListFlights describes every tensor the caller may read.
func (s *Server) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	for _, name := range s.Names() {
		if s.allowed(stream.Context(), dlgrpc.OpRead, name) != nil {
			continue
		}
		e, err := s.acquire(name)
		if err != nil {
			continue // unregistered meanwhile
		}
		info := s.info(name, e)
		e.drop()
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}

// GetFlightInfo describes one tensor.
func (s *Server) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	name, err := nameOf(d)
	if err != nil {
		return nil, err
	}
	if err := s.allowed(ctx, dlgrpc.OpRead, name); err != nil {
		return nil, err
	}
	e, err := s.acquire(name)
	if err != nil {
		return nil, err
	}
	defer e.drop()
	return s.info(name, e), nil
}

// GetSchema answers the schema of a tensor's stream.
func (s *Server) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	info, err := s.GetFlightInfo(ctx, d)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: info.Schema}, nil
}

// DoGet streams the tensor named by the ticket, or the rows of a
// RangeTicket.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	rt, ranged, err := parseTicket(t.GetTicket())
	if err != nil {
		return err
	}
	name := rt.Name
	if err := s.allowed(stream.Context(), dlgrpc.OpRead, name); err != nil {
		return err
	}
	e, err := s.acquire(name)
	if err != nil {
		return err
	}
	// Each message gRPC holds keeps its own hold on the tensor, dropped
	// when gRPC's writer frees it, which it does before it writes the
	// call's status: the call need not wait for it (a handoff between
	// goroutines saved), and a peer still sees the call end only after
	// the server is done with the tensor's bytes.
	h := s.srv.NewHold(e.drop)
	defer h.Drop()
	if e.remote != nil {
		return status.Errorf(codes.FailedPrecondition, "dlflight: %q is held by other servers: fetch the endpoints of its flight info", name)
	}
	l, data, ws := e.l, e.data, (*wireSchema)(nil)
	if ranged {
		if l, err = e.l.rowsOf(rt.From, rt.To); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if l.nbytes > 0 {
			rb := e.l.rowBytes()
			data = e.data[rt.From*rb : rt.To*rb]
		} else {
			data = nil
		}
		ws = l.wire(name)
	} else {
		ws = e.wireFor(name)
	}
	stop := s.srv.WatchStall(stream.Context(), h)
	defer stop()
	return statusOf(send(stream.SendMsg, nil, ws, l, data, h, e.mapped, s.opts.MaxMessageBytes))
}

// DoPut stores the tensor a client sends under the descriptor's name, or
// a range of the rows of one (a parallel Client.Put, see putRange).
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) error {
	// The first message names the tensor; it is checked before anything
	// more is read.
	pre := &inFrame{alloc: s.opts.Allocator}
	if err := stream.RecvMsg(pre); err != nil {
		return statusOf(err)
	}
	refuse := func(err error) error {
		if pre.body != nil {
			pre.body.Release()
		}
		return statusOf(err)
	}
	if pre.err != nil {
		return refuse(pre.err)
	}
	if pr, ok, err := parsePutRange(pre.desc); ok {
		if err != nil {
			return refuse(err)
		}
		return s.putRange(stream, pre, pr)
	}
	name, err := nameOf(pre.desc)
	if err == nil {
		err = s.allowed(stream.Context(), dlgrpc.OpWrite, name)
	}
	if err == nil {
		err = s.roomFor(name)
	}
	if err != nil {
		return refuse(err)
	}
	r := newFrameReader(replay(pre, stream.RecvMsg), s.opts.Allocator, s.opts.MaxTensorBytes)
	r.budget = &s.stored
	t, err := receive(r, s.opts.Allocator)
	if err != nil {
		s.stored.give(r.taken)
		return statusOf(err)
	}
	taken := r.taken
	e := &entry{release: func() { _ = t.Close(); s.stored.give(taken) }}
	if e.l, err = layoutOf(t.DataType(), t.Shape()); err != nil {
		e.release()
		return statusOf(err)
	}
	e.data = t.Bytes()
	e.refs.Store(1)
	if err := s.store(name, e, true); err != nil {
		return statusOf(err)
	}
	return stream.Send(&flight.PutResult{})
}

// replay receives pre first, then what recv receives.
func replay(pre *inFrame, recv func(any) error) func(*inFrame) error {
	return func(f *inFrame) error {
		if pre != nil {
			*f, pre = *pre, nil
			return nil
		}
		return recv(f)
	}
}

// roomFor refuses a new name beyond MaxTensors.
func (s *Server) roomFor(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.tensors[name]; !held && len(s.tensors) >= s.opts.MaxTensors {
		return status.Errorf(codes.ResourceExhausted, "dlflight: %v: the server holds its %d tensors (MaxTensors)", ErrLimit, s.opts.MaxTensors)
	}
	return nil
}

// statusOf gives an error its gRPC status code (dlgrpc.Status).
func statusOf(err error) error { return dlgrpc.Status(err, ErrInvalid, ErrType, ErrName) }
