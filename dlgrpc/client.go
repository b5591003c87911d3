package dlgrpc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
)

// Conn is a client's connection to a tensor service: gRPC's, with the
// codec, transport sizes, TLS and limits of ClientOptions, and the
// metadata (token, headers) every call carries.
type Conn struct {
	*grpc.ClientConn
	opts ClientOptions
	md   metadata.MD
	// received counts the bytes read from the server, over every
	// connection gRPC made for the Conn.
	received atomic.Int64
}

// Dial makes the Conn of a client of service ("dlflight", "dloip") to
// addr ("host:port") with opts, resolved: the message limit defaults to
// defaultMaxMessage. The connection is made on first use. The token and
// headers go with every call on this Conn, and so only to addr.
func Dial(service, addr string, opts ClientOptions, defaultMaxMessage int) (*Conn, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessage
	}
	if opts.MaxTensorBytes == 0 {
		opts.MaxTensorBytes = DefaultMaxTensorBytes
	}
	if opts.Allocator == nil {
		opts.Allocator = DefaultAllocator
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Conn{opts: opts}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	creds = countingCreds{TransportCredentials: creds, n: &c.received}
	md := metadata.MD{}
	for k, v := range opts.Headers {
		md.Append(k, v)
	}
	if opts.Token != "" {
		md.Set("authorization", "Bearer "+opts.Token)
	}
	window, connWindow, rbuf, wbuf := opts.Transport.sizes(opts.MaxMessageBytes)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithStaticStreamWindowSize(window), grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithReadBufferSize(rbuf), grpc.WithWriteBufferSize(wbuf),
		experimental.WithBufferPool(frames),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newCodec()),
			grpc.MaxCallRecvMsgSize(opts.MaxMessageBytes), grpc.MaxCallSendMsgSize(opts.MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("%s: dial %s: %w", service, addr, err)
	}
	c.ClientConn, c.md = conn, md
	return c, nil
}

// Received is how many bytes the server has sent on the Conn so far: a
// call's progress that shows before a whole message has arrived.
func (c *Conn) Received() int64 { return c.received.Load() }

// countingCreds counts the bytes read from every connection it hands
// over, leaving dialing (proxies included) and the handshake to gRPC and
// the credentials it wraps.
type countingCreds struct {
	credentials.TransportCredentials
	n *atomic.Int64
}

func (c countingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	return c.wrap(conn, info)
}

// wrap is conn counted, its socket offered to gRPC when conn is a bare
// one.
func (c countingCreds) wrap(conn net.Conn, info credentials.AuthInfo) (net.Conn, credentials.AuthInfo, error) {
	cc := countingConn{Conn: conn, n: c.n}
	if r := newRawReader(conn); r != nil {
		return readyCountingConn{cc, r}, info, nil
	}
	return cc, info, nil
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{TransportCredentials: c.TransportCredentials.Clone(), n: c.n}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// readyCountingConn is a countingConn whose socket gRPC may read when it
// is readable (rawReader).
type readyCountingConn struct {
	countingConn
	r *rawReader
}

// ReadOnReady is what gRPC's transport reads a connection with when the
// connection offers it; it counts what it read.
func (c readyCountingConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	buf, n, err := c.r.readOnReady(size, pool)
	c.n.Add(int64(n))
	return buf, n, err
}

// Options are the Conn's options, every default filled in.
func (c *Conn) Options() ClientOptions { return c.opts }

// Outgoing is ctx with the Conn's metadata (token, headers) for a call
// on it.
func (c *Conn) Outgoing(ctx context.Context) context.Context {
	if len(c.md) == 0 {
		return ctx
	}
	if old, ok := metadata.FromOutgoingContext(ctx); ok {
		return metadata.NewOutgoingContext(ctx, metadata.Join(old, c.md))
	}
	return metadata.NewOutgoingContext(ctx, c.md)
}

// NewHold is NewHold with the Conn's Logger.
func (c *Conn) NewHold(release func()) *Hold { return NewHold(release, c.opts.Logger) }
