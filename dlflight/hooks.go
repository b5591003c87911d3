package dlflight

import (
	"context"
	"crypto/x509"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultStallTimeout is Options.StallTimeout when zero.
const DefaultStallTimeout = time.Minute

// DefaultHandshakeTimeout is Options.HandshakeTimeout when zero.
const DefaultHandshakeTimeout = 10 * time.Second

// AuthRequest is what an Options.Authenticate hook sees of a call.
type AuthRequest struct {
	// Token is the bearer token of the "authorization" metadata ("" when
	// the call carries none).
	Token string
	// Addr is the peer's network address.
	Addr net.Addr
	// Certificate is the client certificate that TLS verified against
	// the server's tls.Config (ClientAuth VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert, ClientCAs); nil when the peer showed
	// none, the server serves plaintext, or the config did not verify it.
	Certificate *x509.Certificate
	// Chains are the verified chains of Certificate, leaf first.
	Chains [][]*x509.Certificate
}

// authRequest reads the token and peer of an incoming call.
func authRequest(ctx context.Context) AuthRequest {
	var r AuthRequest
	r.Token, _ = bearer(ctx)
	if p, ok := peer.FromContext(ctx); ok {
		r.Addr = p.Addr
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			r.Chains = ti.State.VerifiedChains
			r.Certificate = r.Chains[0][0]
		}
	}
	return r
}

// authError is the status of an Authenticate hook's error: a gRPC
// status as it is (codes.PermissionDenied, say), anything else
// codes.Unauthenticated with the hook's message.
func authError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Unauthenticated, "dlflight: authenticate: %v", err)
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
	tc := &trackedConn{Conn: c, c: l.c, key: c.RemoteAddr().String()}
	l.c.mu.Lock()
	l.c.m[tc.key] = tc
	l.c.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	c    *conns
	key  string
	once sync.Once
	// written counts what Write has handed to the socket: a call's
	// progress on a slow link shows here long before gRPC frees its
	// message (watchStall).
	written atomic.Int64
}

// writeChunk is the most one write system call gets from Write, so that
// written moves while a large write drains to a slow peer.
const writeChunk = 256 << 10

func (c *trackedConn) Write(p []byte) (int, error) {
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

// watchStall ends a DoGet whose stream makes no progress: while the
// handler runs (until stop is called) or gRPC still holds bytes of sd,
// one StallTimeout in which gRPC neither took nor wrote out a message of
// it and no byte of the connection left for the peer (on Linux: the
// socket's send queue did not drain; elsewhere: nothing was written to
// the socket) closes the peer's connection, and the tensor's bytes gRPC dropped with it are reclaimed.
// A slow link that keeps taking bytes is not a stall; a stalled stream
// beside busy ones on the same connection is caught once they end. It
// returns the function the handler calls when it returns.
func (s *Server) watchStall(ctx context.Context, sd *sending) (stop func()) {
	timeout := s.opts.StallTimeout
	stopped := make(chan struct{})
	// The goroutine must not keep ctx: through it gRPC's stream, its
	// transport and the buffers gRPC dropped stay reachable, and a
	// garbage collection could never reclaim them.
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
	}
	tc := s.conns.get(addr)
	progress := func() int64 {
		n := sd.progress.Load()
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
				sd.mu.Lock()
				n, ch := sd.n, sd.idle
				sd.mu.Unlock()
				if n == 0 {
					return
				}
				idle = ch
				continue
			case <-idle:
				return
			case <-tick.C:
			}
			if p := progress(); p != last {
				last, at = p, time.Now()
				continue
			}
			if time.Since(at) < timeout {
				continue
			}
			if tc != nil {
				tc.Close()
			}
			reclaim(func() bool { return sd.pending() == 0 }, reclaimWait)
			return
		}
	}()
	return func() { close(stopped) }
}

// reclaimWait bounds how long Shutdown and a stalled call's end collect
// garbage to find the bytes gRPC dropped.
const reclaimWait = 10 * time.Second

// reclaim returns once done reports true, or after wait: gRPC drops
// without freeing them the queued buffers of a stream whose connection
// closes, and only a garbage collection finds them unreachable (each
// buffer's cleanup then drops its hold on the tensor; see keepBuffer).
// Collecting here releases such tensors now rather than at the next
// collection, which an idle server may not run for minutes.
func reclaim(done func() bool, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for !done() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}
