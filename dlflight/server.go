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
	"time"
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
	// a missing or unknown token gets codes.Unauthenticated. It is the
	// simple case of Authenticate, which replaces it when set.
	Tokens map[string]string
	// Authenticate, when set, decides who makes each call: from the
	// call's bearer token and peer (its address and the client
	// certificate TLS verified, for mutual TLS) it returns the principal
	// that Allow sees, or an error: codes.Unauthenticated with the
	// error's text, or the error's own gRPC status if it has one. It
	// runs on every call, on the call's goroutine; expiring or signed
	// tokens and certificate subjects plug in here. Tokens is then
	// ignored.
	Authenticate func(ctx context.Context, req AuthRequest) (principal string, err error)
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
	// codes.ResourceExhausted beyond it. Zero: no bound. It also bounds
	// the tensors of the parallel Puts under way together (their buffers
	// are allocated at their first range): DefaultMaxGetBytes when zero.
	MaxPutBytes int64
	// Allocator allocates the bodies of received messages (aligned to
	// 64 bytes); when nil, as for ClientOptions.Allocator.
	Allocator memory.Allocator
	// Transport sizes gRPC's flow-control windows and socket buffers.
	Transport Transport
	// StallTimeout bounds how long a DoGet may go without progress
	// (gRPC taking a message of it or writing one out, or bytes of its
	// connection leaving the socket for the peer: a slow link that keeps
	// taking bytes is not a stall) while its reader does not read: the peer's connection is then closed (the peer
	// sees codes.Unavailable, on every call it had on that connection)
	// and the tensor's bytes gRPC held are reclaimed, so an unregistered
	// tensor is released about StallTimeout after its reader stalled.
	// DefaultStallTimeout when zero; negative: no bound.
	StallTimeout time.Duration
	// EndpointBytes: a tensor larger than this is described by
	// GetFlightInfo as several endpoints of about this many bytes each,
	// each a ticket for a range of rows of its first dimension
	// (RangeTicket), so that a client fetches them on parallel streams
	// (Client.Get does); DoGet of the name still streams the whole
	// tensor. DefaultEndpointBytes when zero; negative: one endpoint.
	EndpointBytes int64
	// HandshakeTimeout bounds how long a new connection may take to
	// complete its TLS handshake and HTTP/2 preface before the server
	// closes it (gRPC's ConnectionTimeout, 120 s by default there).
	// DefaultHandshakeTimeout when zero.
	HandshakeTimeout time.Duration
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
	conns   conns
	// uploads are the parallel Puts under way (s.mu).
	uploads map[string]*upload
	// uploadBytes is what the incomplete uploads hold (s.mu).
	uploadBytes int64
	// kept counts the buffers of held tensors gRPC holds, over every
	// DoGet. It is an allocation of its own: the buffers' cleanups reach
	// it (through their sending), and must not reach the Server, from
	// which gRPC's transports and so the buffers themselves are
	// reachable (a cleanup that reaches its object never runs).
	kept *atomic.Int64
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

type principalKey struct{}

// NewServer makes a Server; nothing listens until Serve.
func NewServer(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Allocator == nil {
		opts.Allocator = bodies
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.EndpointBytes == 0 {
		opts.EndpointBytes = DefaultEndpointBytes
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	s := &Server{opts: opts, tensors: map[string]*entry{}, conns: conns{m: map[string]net.Conn{}}, kept: new(atomic.Int64)}
	window, connWindow, rbuf, wbuf := opts.Transport.sizes(opts.MaxMessageBytes)
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		experimental.BufferPool(frames),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		// send checks the tensor's messages against MaxMessageBytes
		// itself; gRPC's bound leaves room for a FlightInfo too
		grpc.MaxSendMsgSize(max(opts.MaxMessageBytes, maxInfoBytes)),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ReadBufferSize(rbuf),
		grpc.WriteBufferSize(wbuf),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		// Stop returns once every handler has, so that Shutdown knows
		// what is left held.
		grpc.WaitForHandlers(true),
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

// bearer is the call's bearer token, if it has one.
func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		// the scheme is case-insensitive (RFC 9110 11.1): "bearer" too
		if len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
			token = v[len("Bearer "):]
		}
	}
	return token, token != ""
}

// authenticate runs Authenticate, or checks the bearer token when Tokens
// is set, and puts the principal in the context.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	if s.opts.Authenticate != nil {
		p, err := s.opts.Authenticate(ctx, authRequest(ctx))
		if err != nil {
			return nil, authError(err)
		}
		return context.WithValue(ctx, principalKey{}, p), nil
	}
	if s.opts.Tokens == nil {
		return context.WithValue(ctx, principalKey{}, ""), nil
	}
	token, ok := bearer(ctx)
	if !ok {
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
	err := s.grpc.Serve(trackingListener{lis, &s.conns})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops the server: listeners close, calls in progress are
// cancelled, and every held tensor is released. A tensor whose bytes a
// call cut off mid-stream left with gRPC, dropped without being freed,
// is released once a garbage collection finds them unreachable:
// Shutdown runs collections until that happens (for up to 10 s) rather
// than leave it to the next one, so it is normally released by the time
// Shutdown returns. Register and DoPut fail afterwards.
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
	s.dropUploads()
	reclaim(func() bool { return s.kept.Load() == 0 }, reclaimWait)
}

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

// DoGet streams the tensor named by the ticket, or the rows of a
// RangeTicket.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	rt, ranged, err := parseTicket(t.GetTicket())
	if err != nil {
		return err
	}
	name := rt.Name
	if err := s.allowed(stream.Context(), OpRead, name); err != nil {
		return err
	}
	e, err := s.acquire(name)
	if err != nil {
		return err
	}
	defer e.drop()
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
	// Each message gRPC holds keeps its own hold on the tensor, dropped
	// when gRPC's writer frees it, which it does before it writes the
	// call's status: the call need not wait for it (a handoff between
	// goroutines saved), and a peer still sees the call end only after
	// the server is done with the tensor's bytes.
	sd := newSending(e)
	sd.all = s.kept
	sendMsg := stream.SendMsg
	if s.opts.StallTimeout > 0 {
		stop := s.watchStall(stream.Context(), sd)
		defer stop()
		sendMsg = func(m any) error {
			err := stream.SendMsg(m)
			sd.progress.Add(1)
			return err
		}
	}
	err = send(sendMsg, nil, ws, l, data, sd, s.opts.MaxMessageBytes)
	return statusOf(err)
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
		return err
	}
	if pr, ok, err := parsePutRange(pre.desc); ok {
		if err != nil {
			return refuse(err)
		}
		return s.putRange(stream, pre, pr)
	}
	name, err := nameOf(pre.desc)
	if err == nil {
		err = s.allowed(stream.Context(), OpWrite, name)
	}
	if err == nil {
		err = s.roomFor(name)
	}
	if err != nil {
		return refuse(err)
	}
	r := newFrameReader(replay(pre, stream.RecvMsg), s.opts.Allocator, s.opts.MaxPutBytes)
	t, err := receive(r, s.opts.Allocator)
	if err != nil {
		return statusOf(err)
	}
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
	if s.opts.MaxTensors <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.tensors[name]; !held && len(s.tensors) >= s.opts.MaxTensors {
		return status.Errorf(codes.ResourceExhausted, "dlflight: the server holds its %d tensors", s.opts.MaxTensors)
	}
	return nil
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
