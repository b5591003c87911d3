package dlflight

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// DefaultMaxMessageBytes is the message limit when Options and
// ClientOptions leave it zero: a tensor larger than this travels as
// several batches, split along its first dimension.
const DefaultMaxMessageBytes = 16 << 20

// DefaultMaxGetBytes is the bound on the bytes one Client.Get receives
// when ClientOptions leave it zero: 4 GiB.
const DefaultMaxGetBytes = 4 << 30

// Op is what a caller asks to do with a named tensor, as the policy sees
// it.
type Op int

const (
	// OpRead: ListFlights, GetFlightInfo and DoGet.
	OpRead Op = iota
	// OpWrite: DoPut.
	OpWrite
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Options configure a Server. The zero Options serve plaintext to anyone,
// which suits only tests on loopback.
type Options struct {
	// TLS, when set, is the server's TLS configuration (certificates,
	// client authentication).
	TLS *tls.Config
	// Tokens maps each accepted bearer token to the principal it
	// authenticates. When set, every call needs the gRPC metadata
	// "authorization: Bearer <token>" (what pyarrow.flight sends with
	// FlightCallOptions(headers=[(b"authorization", b"Bearer ...")]));
	// a missing or unknown token gets codes.Unauthenticated.
	Tokens map[string]string
	// Allow, when set, decides per principal ("" without Tokens),
	// operation and tensor name; a refusal gets codes.PermissionDenied
	// (ListFlights leaves such names out).
	Allow func(principal string, op Op, name string) bool
	// MaxMessageBytes bounds every gRPC message either way
	// (DefaultMaxMessageBytes when zero); larger tensors are split.
	MaxMessageBytes int
	// MaxTensors bounds how many tensors the server holds; a DoPut of a
	// new name beyond it gets codes.ResourceExhausted (Register is not
	// bounded: it is the program's own decision). Zero: no bound.
	MaxTensors int
	// MaxPutBytes bounds the bytes (message bodies and headers) of one
	// DoPut stream;
	// codes.ResourceExhausted beyond it. Zero: no bound.
	MaxPutBytes int64
	// Allocator allocates the bodies of received messages (aligned to
	// 64 bytes); when nil, as for ClientOptions.Allocator.
	Allocator memory.Allocator
	// Transport sizes gRPC's flow-control windows and socket buffers.
	Transport Transport
}

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
	grpc    *grpc.Server
	mu      sync.Mutex
	tensors map[string]*entry
	closed  bool
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

type principalKey struct{}

// NewServer makes a Server; nothing listens until Serve.
func NewServer(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Allocator == nil {
		opts.Allocator = bodies
	}
	s := &Server{opts: opts, tensors: map[string]*entry{}}
	window, connWindow, rbuf, wbuf := opts.Transport.sizes(opts.MaxMessageBytes)
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		experimental.BufferPool(frames),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ReadBufferSize(rbuf),
		grpc.WriteBufferSize(wbuf),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := s.authenticate(ctx)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := s.authenticate(ss.Context())
			if err != nil {
				return err
			}
			return h(srv, authStream{ss, ctx})
		}),
	}
	if opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(gopts...)
	flight.RegisterFlightServiceServer(s.grpc, s)
	return s
}

type authStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authStream) Context() context.Context { return a.ctx }

// authenticate checks the bearer token when Tokens is set and puts the
// principal in the context.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	if s.opts.Tokens == nil {
		return context.WithValue(ctx, principalKey{}, ""), nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		// the scheme is case-insensitive (RFC 9110 11.1): "bearer" too
		if len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
			token = v[len("Bearer "):]
		}
	}
	if token == "" {
		return nil, status.Error(codes.Unauthenticated, "dlflight: no bearer token in the authorization metadata")
	}
	principal, found := "", false
	for t, p := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			principal, found = p, true
		}
	}
	if !found {
		return nil, status.Error(codes.Unauthenticated, "dlflight: unknown bearer token")
	}
	return context.WithValue(ctx, principalKey{}, principal), nil
}

func (s *Server) allowed(ctx context.Context, op Op, name string) error {
	if s.opts.Allow == nil {
		return nil
	}
	p, _ := ctx.Value(principalKey{}).(string)
	if !s.opts.Allow(p, op, name) {
		return status.Errorf(codes.PermissionDenied, "dlflight: %q may not %s %q", p, op, name)
	}
	return nil
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
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops the server: listeners close, calls in progress are
// cancelled, and every held tensor is released (after the DoGets sending
// it end). Register and DoPut fail afterwards.
func (s *Server) Shutdown() {
	s.grpc.Stop()
	s.mu.Lock()
	s.closed = true
	held := s.tensors
	s.tensors = map[string]*entry{}
	s.mu.Unlock()
	for _, e := range held {
		e.drop()
	}
}

func (s *Server) info(name string, e *entry) *flight.FlightInfo {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
	i := Info{Name: name, DType: e.l.dtype, Shape: e.l.shape, Bytes: e.l.nbytes}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(e.l.schema(name), memory.DefaultAllocator),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: []byte(name)}}},
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
		if s.allowed(stream.Context(), OpRead, name) != nil {
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
	if err := s.allowed(ctx, OpRead, name); err != nil {
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

// DoGet streams the tensor named by the ticket.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	name := string(t.GetTicket())
	if err := s.allowed(stream.Context(), OpRead, name); err != nil {
		return err
	}
	e, err := s.acquire(name)
	if err != nil {
		return err
	}
	defer e.drop()
	// Each message gRPC holds keeps its own hold on the tensor, dropped
	// when gRPC's writer frees it, which it does before it writes the
	// call's status: the call need not wait for it (a handoff between
	// goroutines saved), and a peer still sees the call end only after
	// the server is done with the tensor's bytes.
	err = send(stream.SendMsg, nil, e.wireFor(name), e.l, e.data, newSending(e), s.opts.MaxMessageBytes)
	return statusOf(err)
}

// DoPut stores the tensor a client sends under the descriptor's name.
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) error {
	r := newFrameReader(func(f *inFrame) error { return stream.RecvMsg(f) }, s.opts.Allocator, s.opts.MaxPutBytes)
	var checked error
	first := r.recv
	r.recv = func(f *inFrame) error {
		if err := first(f); err != nil {
			return err
		}
		r.recv = first
		name, err := nameOf(f.desc)
		if err == nil {
			err = s.allowed(stream.Context(), OpWrite, name)
		}
		if err == nil && s.opts.MaxTensors > 0 {
			s.mu.Lock()
			if _, held := s.tensors[name]; !held && len(s.tensors) >= s.opts.MaxTensors {
				err = status.Errorf(codes.ResourceExhausted, "dlflight: the server holds its %d tensors", s.opts.MaxTensors)
			}
			s.mu.Unlock()
		}
		if err != nil {
			if f.body != nil {
				f.body.Release()
				f.body = nil
			}
			checked = err
		}
		return err
	}
	t, err := receive(r, s.opts.Allocator)
	if checked != nil {
		return checked
	}
	if err != nil {
		return statusOf(err)
	}
	name, _ := nameOf(r.desc)
	e := &entry{l: layout{}, release: func() { _ = t.Close() }}
	if e.l, err = layoutOf(t.dtype, t.shape); err != nil {
		t.Close()
		return statusOf(err)
	}
	e.data = t.data
	e.refs.Store(1)
	if err := s.store(name, e, true); err != nil {
		return statusOf(err)
	}
	return stream.Send(&flight.PutResult{})
}

// statusOf gives an error its gRPC status code.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, errLimit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrInvalid), errors.Is(err, errFrame), errors.Is(err, ErrType), errors.Is(err, ErrShape), errors.Is(err, ErrName):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrTruncated):
		return status.Error(codes.Internal, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
