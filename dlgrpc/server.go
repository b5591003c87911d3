package dlgrpc

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Server is the gRPC server a tensor service runs on: the codec,
// transport sizes, TLS, authentication before any message of a call is
// read, the concurrency bound, recovery from panics in the service's and
// the user's code, and the stall watch. A service registers its gRPC
// service on it and serves.
type Server struct {
	service string
	opts    ServerOptions
	grpc    *grpc.Server
	conns   conns
	// calls holds a token per call running (MaxConcurrentCalls).
	calls chan struct{}
	// held counts the buffers of sent tensors gRPC holds, over every
	// call (Held). It is an allocation of its own: the buffers' cleanups
	// reach it (through their Hold), and must not reach the Server, from
	// which gRPC's transports and so the buffers themselves are
	// reachable (a cleanup that reaches its object never runs).
	held *atomic.Int64
}

type principalKey struct{}

// NewServer makes the server of service ("dlflight", "dloip": it
// prefixes the messages of its errors) with opts, resolved: the message
// limit defaults to defaultMaxMessage, and gRPC's send limit is the
// message limit or minSend, whichever is larger (a service that checks
// its large messages itself may need room for a larger small one).
func NewServer(service string, opts ServerOptions, defaultMaxMessage, minSend int) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessage
	}
	if opts.MaxTensorBytes <= 0 {
		opts.MaxTensorBytes = DefaultMaxTensorBytes
	}
	if opts.MaxConcurrentCalls <= 0 {
		opts.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.Allocator == nil {
		opts.Allocator = DefaultAllocator
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{service: service, opts: opts, conns: conns{m: map[string]net.Conn{}}, calls: make(chan struct{}, opts.MaxConcurrentCalls), held: new(atomic.Int64)}
	window, connWindow, rbuf, wbuf := opts.Transport.sizes(opts.MaxMessageBytes)
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		experimental.BufferPool(frames),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(max(opts.MaxMessageBytes, minSend)),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ReadBufferSize(rbuf),
		grpc.WriteBufferSize(wbuf),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		// Stop returns once every handler has, so that a service knows
		// what is left held.
		grpc.WaitForHandlers(true),
		grpc.InTapHandle(s.admit),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			defer placeOf(ctx).leave()
			defer func() {
				if r := recover(); r != nil {
					resp, err = nil, s.panicStatus(info.FullMethod, r)
				}
			}()
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer placeOf(ss.Context()).leave()
			defer func() {
				if r := recover(); r != nil {
					err = s.panicStatus(info.FullMethod, r)
				}
			}()
			return h(srv, ss)
		}),
	}
	if opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(gopts...)
	return s
}

// Options are the server's options, every default filled in.
func (s *Server) Options() ServerOptions { return s.opts }

// RegisterService registers a gRPC service's implementation.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
}

// Serve serves on lis until Stop or GracefulStop; it returns nil then.
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(trackingListener{lis, &s.conns})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop closes the listeners and connections, cancelling the calls in
// progress, and returns once their handlers have.
func (s *Server) Stop() { s.grpc.Stop() }

// GracefulStop stops accepting calls and returns once the running ones
// have finished.
func (s *Server) GracefulStop() { s.grpc.GracefulStop() }

// admit runs when a call's headers arrive, before any of its messages
// is read: it authenticates the caller and takes one of the
// MaxConcurrentCalls places, given back when the call ends.
func (s *Server) admit(ctx context.Context, info *tap.Info) (context.Context, error) {
	var addr net.Addr
	var state *tls.ConnectionState
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			state = &ti.State
		}
	}
	ctx, p, err := s.enter(ctx, info.FullMethodName, bearer(info.Header.Get("authorization")), addr, state)
	if err != nil {
		return nil, err
	}
	// The handler gives the place back when it returns, before its
	// answer goes out; a call that ends before its handler runs gives it
	// back when gRPC cancels its context, which it does for every call
	// that ends.
	context.AfterFunc(ctx, p.leave)
	return ctx, nil
}

// AdmitHTTP admits an HTTP request as a gRPC call is admitted: it
// authenticates the caller (Tokens or Authenticate, from the
// "Authorization" header, the peer's address and the client certificate
// TLS verified) and takes one of the MaxConcurrentCalls places, shared
// with the gRPC calls. It returns the request's context, carrying the
// principal (Principal), and the function that gives the place back,
// which the handler calls when it is done. Its error is a gRPC status:
// codes.Unauthenticated (or the hook's own), codes.ResourceExhausted,
// codes.Internal for a hook that panicked. A service's REST handlers
// call it before they read the request's body.
func (s *Server) AdmitHTTP(r *http.Request) (ctx context.Context, done func(), err error) {
	var addr net.Addr
	if a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		addr = a
	}
	ctx, p, err := s.enter(r.Context(), r.Method+" "+r.URL.Path, bearer(r.Header.Values("Authorization")), addr, r.TLS)
	if err != nil {
		return nil, nil, err
	}
	return ctx, p.leave, nil
}

// enter authenticates a call and takes its place among
// MaxConcurrentCalls.
func (s *Server) enter(ctx context.Context, method, token string, addr net.Addr, state *tls.ConnectionState) (context.Context, *place, error) {
	var principal string
	err := SafeCall(s.opts.Logger, "the Authenticate hook", func() (err error) {
		principal, err = s.authenticate(ctx, method, token, addr, state)
		return err
	})
	if errors.Is(err, ErrPanic) {
		return nil, nil, status.Errorf(codes.Internal, "%s: %v", s.service, err)
	}
	if err != nil {
		return nil, nil, err
	}
	select {
	case s.calls <- struct{}{}:
	default:
		return nil, nil, status.Errorf(codes.ResourceExhausted, "%s: %v: the server runs %d calls at once (MaxConcurrentCalls)", s.service, ErrLimit, cap(s.calls))
	}
	p := &place{calls: s.calls}
	return context.WithValue(context.WithValue(ctx, principalKey{}, principal), placeKey{}, p), p, nil
}

// place is a call's place among MaxConcurrentCalls, given back once.
type place struct {
	calls chan struct{}
	once  sync.Once
}

type placeKey struct{}

func placeOf(ctx context.Context) *place {
	p, _ := ctx.Value(placeKey{}).(*place)
	return p
}

func (p *place) leave() {
	if p != nil {
		p.once.Do(func() { <-p.calls })
	}
}

// TakePlace takes one more of the MaxConcurrentCalls places, as a call
// takes its own, for a call that runs more than one piece of work at
// once (a stream's second request in flight): ok is false when none is
// free. leave gives it back, once. A call's own place is taken when it
// is admitted; TakePlace is for the work beyond it, so that
// MaxConcurrentCalls bounds what runs at once, streams included.
func (s *Server) TakePlace() (leave func(), ok bool) {
	select {
	case s.calls <- struct{}{}:
		p := &place{calls: s.calls}
		return p.leave, true
	default:
		return nil, false
	}
}

// authenticate runs Authenticate, or checks the bearer token when Tokens
// is set, and returns the principal.
func (s *Server) authenticate(ctx context.Context, method, token string, addr net.Addr, state *tls.ConnectionState) (string, error) {
	if s.opts.Authenticate == nil && s.opts.Tokens == nil {
		return "", nil
	}
	if s.opts.Authenticate != nil {
		req := AuthRequest{Method: method, Token: token, Addr: addr}
		if state != nil && len(state.VerifiedChains) > 0 {
			req.Chains = state.VerifiedChains
			req.Certificate = req.Chains[0][0]
		}
		p, err := s.opts.Authenticate(ctx, req)
		if err != nil {
			if _, ok := status.FromError(err); ok {
				return "", err
			}
			return "", status.Errorf(codes.Unauthenticated, "%s: authenticate: %v", s.service, err)
		}
		return p, nil
	}
	if token == "" {
		return "", status.Errorf(codes.Unauthenticated, "%s: no bearer token in the authorization metadata", s.service)
	}
	principal, found := "", false
	for t, p := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			principal, found = p, true
		}
	}
	if !found {
		return "", status.Errorf(codes.Unauthenticated, "%s: unknown bearer token", s.service)
	}
	return principal, nil
}

// bearer is the bearer token of the authorization values, "" when
// they have none.
func bearer(values []string) string {
	var token string
	for _, v := range values {
		// the scheme is case-insensitive (RFC 9110 11.1): "bearer" too
		if len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
			token = v[len("Bearer "):]
		}
	}
	return token
}

// Principal is the principal the server authenticated the call of ctx
// as ("" without Tokens or Authenticate).
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// Allowed is nil when Allow (if set) lets the call's principal do op
// with name, else codes.PermissionDenied; a panic in Allow is
// codes.Internal.
func (s *Server) Allowed(ctx context.Context, op Op, name string) error {
	if s.opts.Allow == nil {
		return nil
	}
	p := Principal(ctx)
	var ok bool
	if err := SafeCall(s.opts.Logger, "the Allow hook", func() error { ok = s.opts.Allow(p, op, name); return nil }); err != nil {
		return status.Errorf(codes.Internal, "%s: %v", s.service, err)
	}
	if !ok {
		return status.Errorf(codes.PermissionDenied, "%s: %q may not %s %q", s.service, p, op, name)
	}
	return nil
}

// Call runs fn, user code the service calls on a call's goroutine (a
// model, say), turning a panic in it into an error wrapping ErrPanic
// that names what; the panic is reported to Logger.
func (s *Server) Call(what string, fn func() error) error { return SafeCall(s.opts.Logger, what, fn) }

// panicStatus reports a panic that reached the interceptor and is the
// status of the call it ended.
func (s *Server) panicStatus(method string, r any) error {
	return status.Errorf(codes.Internal, "%s: %v", s.service, recovered(s.opts.Logger, method, r))
}

// NewHold is NewHold with the server's Logger, its buffers counted in
// Held.
func (s *Server) NewHold(release func()) *Hold {
	h := NewHold(release, s.opts.Logger)
	h.all = s.held
	return h
}

// Held is how many buffers of sent tensors gRPC holds, over every call.
func (s *Server) Held() int64 { return s.held.Load() }

// Reclaim returns once gRPC holds no buffer of a sent tensor, or after
// wait. gRPC drops without freeing them the queued buffers of a
// connection that closes, and only a garbage collection finds them
// unreachable (each buffer's cleanup then drops its hold on the tensor):
// collecting here releases such tensors now rather than at the next
// collection, which an idle server may not run for minutes.
func (s *Server) Reclaim(wait time.Duration) {
	reclaim(func() bool { return s.held.Load() == 0 }, wait)
}

func reclaim(done func() bool, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for !done() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// conns tracks the server's connections by remote address, so that a
// stalled call's connection can be closed.
type conns struct {
	mu sync.Mutex
	m  map[string]net.Conn
}

// trackingListener registers every accepted connection in conns.
type trackingListener struct {
	net.Listener
	c *conns
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, raw: rawConn(c), c: l.c, key: c.RemoteAddr().String(), done: make(chan struct{})}
	l.c.mu.Lock()
	l.c.m[tc.key] = tc
	l.c.mu.Unlock()
	if r := newRawReader(c); r != nil {
		return readyConn{tc, r}, nil
	}
	return tc, nil
}

// readyConn is a trackedConn whose socket gRPC may read when it is
// readable (rawReader).
type readyConn struct {
	*trackedConn
	r *rawReader
}

// ReadOnReady is what gRPC's transport reads a connection with when the
// connection offers it.
func (c readyConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	return c.r.readOnReady(size, pool)
}

type trackedConn struct {
	net.Conn
	// raw writes to the socket itself where it can (Linux), counting
	// each part the kernel takes; nil elsewhere
	raw  syscall.RawConn
	c    *conns
	key  string
	once sync.Once
	// done is closed when the connection is.
	done chan struct{}
	// written counts what Write has handed to the socket: a call's
	// progress on a slow link shows here long before gRPC frees its
	// message (WatchStall).
	written atomic.Int64
}

// writeChunk is the most one write system call gets from Write where
// the socket cannot be written directly, so that written moves while a
// large write drains to a slow peer.
const writeChunk = 256 << 10

func (c *trackedConn) Write(p []byte) (int, error) {
	if c.raw != nil {
		// one write as net.Conn's, written moving with every part the
		// kernel takes (cutting writes into chunks instead cost 6% of a
		// 1 MiB call on loopback)
		n, err := writeRaw(c.raw, p, &c.written)
		if err != nil {
			err = &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
		}
		return n, err
	}
	n := 0
	for n < len(p) {
		m, err := c.Conn.Write(p[n:min(len(p), n+writeChunk)])
		n += m
		c.written.Add(int64(m))
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		if c.c.m[c.key] == net.Conn(c) {
			delete(c.c.m, c.key)
		}
		c.c.mu.Unlock()
		close(c.done)
	})
	return c.Conn.Close()
}

// get is the connection of the peer at addr, if it is still open.
func (c *conns) get(addr net.Addr) *trackedConn {
	if addr == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tc, _ := c.m[addr.String()].(*trackedConn)
	return tc
}

// WatchStall ends a call that sends to a peer that does not read: while
// the handler runs (until stop is called) or gRPC still holds buffers of
// h, one StallTimeout in which no message of h was sent or freed and no
// byte of the connection left for the peer (on Linux: the socket's send
// queue did not drain; elsewhere: nothing was written to the socket)
// closes the peer's connection, and the buffers gRPC dropped with it are
// reclaimed. A slow link that keeps taking bytes is not a stall. The
// watch ends with the call: when gRPC has freed every buffer of h after
// the handler returned, or at once when the connection closes (a peer
// that went away: the buffers gRPC dropped with it are then reclaimed,
// rather than left to StallTimeout or the next collection). It returns
// the function the handler calls when it returns. With a negative
// StallTimeout it watches nothing.
func (s *Server) WatchStall(ctx context.Context, h *Hold) (stop func()) {

	timeout := s.opts.StallTimeout
	if timeout < 0 {
		return func() {}
	}
	stopped := make(chan struct{})
	// The goroutine must not keep ctx: through it gRPC's stream, its
	// transport and the buffers gRPC dropped stay reachable, and a
	// garbage collection could never reclaim them.
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
	}
	tc := s.conns.get(addr)
	var connDone <-chan struct{}
	if tc != nil {
		connDone = tc.done
	}
	progress := func() int64 {
		n := h.Progress()
		if tc != nil {
			// what left the socket: a full socket buffer wakes its
			// writer only once much of it drained, which on a slow
			// link can take longer than the timeout
			n += tc.written.Load()
			if q, ok := unsent(tc.Conn); ok {
				n -= q
			}
		}
		return n
	}
	go func() {
		tick := time.NewTicker(max(timeout/8, time.Millisecond))
		defer tick.Stop()
		last, at := progress(), time.Now()
		handlerDone := stopped
		var idle <-chan struct{}
		for {
			select {
			case <-handlerDone:
				// no buffer is added after the handler returns: once
				// gRPC frees those it holds, the call is over
				handlerDone = nil
				if idle = h.idleChan(); idle == nil {
					return
				}
				continue
			case <-idle:
				return
			case <-connDone:
				// gRPC drops the queued buffers of a closed connection
				// without freeing them: find them now
				reclaim(func() bool { return h.Pending() == 0 }, reclaimWait)
				return
			case <-tick.C:
			}
			if p := progress(); p != last || h.onlyBusy && !h.busy() {
				last, at = p, time.Now()
				continue
			}
			if time.Since(at) < timeout {
				continue
			}
			if tc != nil {
				tc.Close()
			}
			reclaim(func() bool { return h.Pending() == 0 }, reclaimWait)
			return
		}
	}()
	return func() { close(stopped) }
}

// WatchSends is WatchStall for a call that sends now and then and may
// wait between sends (for its peer's next message, for a model's next
// response): only the time in which a send is under way (Hold.Sending)
// or gRPC holds buffers of h (or of a Hold Within it) counts as time
// without progress, so a call that is idle is not stalled, and a peer
// that stops reading while the call sends to it is cut after
// StallTimeout. h usually has no release of its own: each message's
// tensors are held by a Hold Within h.
func (s *Server) WatchSends(ctx context.Context, h *Hold) (stop func()) {
	h.onlyBusy = true
	return s.WatchStall(ctx, h)
}

// reclaimWait bounds how long the end of a stalled call collects
// garbage to find the bytes gRPC dropped.
const reclaimWait = 10 * time.Second

// Errorf is an error of the service: its name, then the message.
func (s *Server) Errorf(format string, args ...any) error {
	return fmt.Errorf(s.service+": "+format, args...)
}

// GRPC is the gRPC server, for registering a service whose generated
// code asks for it.
func (s *Server) GRPC() *grpc.Server { return s.grpc }
