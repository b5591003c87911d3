package dlflight

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ClientOptions configure a Client, mirroring Options.
type ClientOptions struct {
	// TLS, when set, is the client's TLS configuration (the roots that
	// verify the server); nil dials plaintext.
	TLS *tls.Config
	// Token, when set, is sent with every call as the gRPC metadata
	// "authorization: Bearer <Token>".
	Token string
	// MaxMessageBytes bounds every message either way
	// (DefaultMaxMessageBytes when zero); larger tensors are split on Put.
	MaxMessageBytes int
	// MaxGetBytes bounds the bytes (message bodies and headers) one Get
	// receives (DefaultMaxGetBytes
	// when zero; negative: no bound): a server that sends more, such as
	// one that streams rows without end under a schema that does not give
	// the tensor's shape, fails the Get with an error wrapping ErrLimit,
	// and what arrived is released.
	MaxGetBytes int64
	// Allocator allocates received bodies (aligned to 64 bytes). When
	// nil, bodies under 1 MiB come from memory.DefaultAllocator, and
	// larger ones from buffers that earlier bodies of about the same size
	// (within 12.5%) left when their tensors were released, which spares
	// the kernel faulting fresh pages in; the garbage collector empties
	// that pool when it goes unused.
	Allocator memory.Allocator
	// Transport sizes gRPC's flow-control windows and socket buffers.
	Transport Transport
	// Streams is how many endpoints of one tensor Get fetches at once,
	// each on its own stream (DefaultStreams when zero), and how many
	// ranges Put sends at once.
	Streams int
	// PutRangeBytes, when positive, makes Put send a tensor larger than
	// this as ranges of rows of about this many bytes, on up to Streams
	// DoPuts at once, which a dlflight Server assembles in one buffer and
	// stores once every range has arrived. Zero: one stream, which any
	// Flight server takes (the ranges are a dlflight protocol).
	PutRangeBytes int64
	// TrustLocation decides which other servers Get may fetch rows from
	// when a FlightInfo names them. Get dials a location it follows with
	// these options, Token included, so this is what keeps the token from
	// going wherever a server's answer points. It is called with the
	// location's "host:port" and whether it speaks TLS; a location it
	// refuses is not dialled, and counts as a failed replica, with an
	// error wrapping ErrLocation. When nil, only locations on the host
	// this client was dialled with (the same name or address, compared
	// as written, any port) are followed.
	TrustLocation func(addr string, tls bool) bool
}

// Client fetches and sends tensors of a Flight server: a dlflight Server
// or any Flight service that streams one fixed_shape_tensor column
// (pyarrow.flight's, for one). Its methods may be called from many
// goroutines at once.
type Client struct {
	opts ClientOptions
	// host is the host of the address Dial was given, the one whose
	// locations Get follows unless TrustLocation says otherwise.
	host string
	conn *grpc.ClientConn
	fc   flight.FlightServiceClient
	// closed is set by the first Close.
	closed atomic.Bool
	// peers are the clients of other servers that endpoints' locations
	// named, dialled with these options; Close closes them.
	peersMu sync.Mutex
	peers   map[string]*Client
}

// Dial makes a Client of the server at addr ("host:port"); the connection
// is made on first use.
func Dial(addr string, opts ClientOptions) (*Client, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxGetBytes == 0 {
		opts.MaxGetBytes = DefaultMaxGetBytes
	}
	if opts.Allocator == nil {
		opts.Allocator = bodies
	}
	if opts.Streams <= 0 {
		opts.Streams = DefaultStreams
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	window, connWindow, rbuf, wbuf := opts.Transport.sizes(opts.MaxMessageBytes)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithStaticStreamWindowSize(window), grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithReadBufferSize(rbuf), grpc.WithWriteBufferSize(wbuf),
		experimental.WithBufferPool(frames),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newCodec()),
			grpc.MaxCallRecvMsgSize(opts.MaxMessageBytes), grpc.MaxCallSendMsgSize(opts.MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("dlflight: dial %s: %w", addr, err)
	}
	return &Client{opts: opts, host: hostOf(addr), conn: conn, fc: flight.NewFlightServiceClient(conn)}, nil
}

// hostOf is the host of a "host:port" address, or the address itself
// when it has no port.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Close closes the connection. Calling it again does nothing and
// returns nil; a call made after Close fails with an error wrapping
// dlpack.ErrClosed.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.peersMu.Lock()
	peers := c.peers
	c.peers = nil
	c.peersMu.Unlock()
	for _, p := range peers {
		p.Close()
	}
	return c.conn.Close()
}

// errIfClosed is the error of a call made after Close.
func (c *Client) errIfClosed(call string) error {
	if c.closed.Load() {
		return fmt.Errorf("dlflight: %s: %w: the client is closed", call, dlpack.ErrClosed)
	}
	return nil
}

func (c *Client) ctx(ctx context.Context) context.Context {
	if c.opts.Token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.opts.Token)
}

// List describes the tensors the server lets the caller read.
func (c *Client) List(ctx context.Context) ([]Info, error) {
	if err := c.errIfClosed("list"); err != nil {
		return nil, err
	}
	stream, err := c.fc.ListFlights(c.ctx(ctx), &flight.Criteria{})
	if err != nil {
		return nil, err
	}
	var infos []Info
	for {
		fi, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return infos, nil
		}
		if err != nil {
			return nil, err
		}
		i, err := infoOf(fi)
		if err != nil {
			return nil, err
		}
		infos = append(infos, i)
	}
}

// Info describes one tensor (GetFlightInfo).
func (c *Client) Info(ctx context.Context, name string) (Info, error) {
	if err := c.errIfClosed("info"); err != nil {
		return Info{}, err
	}
	fi, err := c.fc.GetFlightInfo(c.ctx(ctx), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}})
	if err != nil {
		return Info{}, err
	}
	return infoOf(fi)
}

// infoOf reads a FlightInfo: the app metadata a dlflight server writes,
// or else the schema and record count any Flight server gives.
func infoOf(fi *flight.FlightInfo) (Info, error) {
	var j infoJSON
	if len(fi.AppMetadata) > 0 && json.Unmarshal(fi.AppMetadata, &j) == nil && j.DType != "" {
		dt, err := dlpack.ParseDataType(j.DType)
		if err != nil {
			return Info{}, fmt.Errorf("%w: app_metadata dtype: %w", ErrInvalid, err)
		}
		return Info{Name: j.Name, DType: dt, Shape: j.Shape, Bytes: j.Bytes}, nil
	}
	schema, err := flight.DeserializeSchema(fi.Schema, memory.DefaultAllocator)
	if err != nil {
		return Info{}, fmt.Errorf("%w: schema: %w", ErrInvalid, err)
	}
	l, err := checkSchema(schema)
	if err != nil {
		return Info{}, err
	}
	if l.rows < 0 {
		if l, err = layoutOf(l.dtype, append([]int64{fi.TotalRecords}, l.rowShape...)); err != nil {
			return Info{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	var name string
	if d := fi.FlightDescriptor; d != nil && len(d.Path) > 0 {
		name = d.Path[0]
	}
	return Info{Name: name, DType: l.dtype, Shape: l.shape, Bytes: l.nbytes}, nil
}

// Get fetches the tensor name and returns it without a copy after gRPC
// hands over each message. It asks for the tensor's FlightInfo first:
//
//   - One endpoint on this server (a tensor of at most the server's
//     Options.EndpointBytes, or a Flight server that lists one, or one
//     whose GetFlightInfo fails for a reason other than the caller's
//     credentials, the call's context or the connection): a DoGet with
//     the name as ticket. The codec
//     copies each message body once out of gRPC's frame buffers into an
//     aligned buffer and the Tensor shares it; a tensor that came split in
//     several batches is copied once more, into one buffer.
//   - Several endpoints, each a range of rows (a dlflight server's
//     app_metadata {"from", "to"}), possibly at other locations: Get
//     fetches them on up to ClientOptions.Streams parallel streams, each
//     straight into its slice of one 64-byte aligned buffer (the codec's
//     copy out of gRPC's frames is the only one), dialling each location
//     with the client's TLS and token options and trying an endpoint's
//     locations (replicas) in order. An endpoint that fails on every
//     location fails the Get with an error naming it, its rows and its
//     locations; nothing is kept.
//
// Get dials a location with the client's options, token included, and
// TLS verifies each against the same roots; so by default it follows
// only locations on the host it was dialled with, and
// ClientOptions.TrustLocation names the other places the token may go.
// A location not trusted is never dialled (ErrLocation).
//
// Close the Tensor when done.
func (c *Client) Get(ctx context.Context, name string) (*Tensor, error) {
	if err := c.errIfClosed(fmt.Sprintf("get %q", name)); err != nil {
		return nil, err
	}
	// a FlightInfo is small, but may exceed a tiny message limit that
	// only the tensor's messages are meant to meet
	fi, err := c.fc.GetFlightInfo(c.ctx(ctx), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}},
		grpc.MaxCallRecvMsgSize(max(c.opts.MaxMessageBytes, maxInfoBytes)))
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Canceled, codes.DeadlineExceeded, codes.Unavailable:
		return nil, err
	case codes.OK:
		i, err := infoOf(fi)
		if err != nil {
			return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
		}
		l, err := layoutOf(i.DType, i.Shape)
		if err != nil {
			return nil, fmt.Errorf("dlflight: get %q: %w: %w", name, ErrInvalid, err)
		}
		eps, several, err := endpointsOf(fi, l)
		if err != nil {
			return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
		}
		if several {
			if max(c.opts.MaxGetBytes, 0) > 0 && l.nbytes > c.opts.MaxGetBytes {
				return nil, fmt.Errorf("dlflight: get %q: %w: the tensor's %d bytes exceed MaxGetBytes %d", name, errLimit, l.nbytes, c.opts.MaxGetBytes)
			}
			return c.getParallel(ctx, name, l, eps)
		}
	}
	// one endpoint, or a Flight server that describes its streams
	// otherwise or not at all: DoGet of the name
	ctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := c.fc.DoGet(ctx, &flight.Ticket{Ticket: []byte(name)})
	if err != nil {
		return nil, err
	}
	r := newFrameReader(func(f *inFrame) error { return stream.RecvMsg(f) }, c.opts.Allocator, max(c.opts.MaxGetBytes, 0))
	t, err := receive(r, c.opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
	}
	return t, nil
}

// maxInfoBytes bounds the FlightInfo Get reads, whatever the message
// limit.
const maxInfoBytes = 4 << 20

// Put sends p's tensor to be stored under name (DoPut). The batches share
// p's memory and the codec hands it to gRPC without a copy: gRPC's writer
// copies it into the socket's buffer. p must be a compact row-major CPU
// tensor of an element type Arrow has; it stays the caller's. The
// tensor Put takes from p is released when Put returns (should the call
// fail while gRPC still holds some of its bytes, once gRPC lets go of
// them).
func (c *Client) Put(ctx context.Context, name string, p dlpack.Producer) error {
	if err := c.errIfClosed(fmt.Sprintf("put %q", name)); err != nil {
		return err
	}
	e, err := hold(p)
	if err != nil {
		return fmt.Errorf("dlflight: put %q: %w", name, err)
	}
	defer e.drop()
	if c.opts.PutRangeBytes > 0 && len(split(e.l, c.opts.PutRangeBytes)) > 1 {
		return c.putParallel(ctx, name, e)
	}
	ctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := c.fc.DoPut(ctx)
	if err != nil {
		return err
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
	sd := newSending(e)
	if err := send(stream.SendMsg, desc, e.l.wire(name), e.l, e.data, sd, c.opts.MaxMessageBytes); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("dlflight: put %q: %w", name, err)
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				sd.wait(ctx)
				return nil
			}
			return err
		}
	}
}
