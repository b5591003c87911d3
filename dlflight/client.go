package dlflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client fetches and sends tensors of a Flight server: a dlflight Server
// or any Flight service that streams one fixed_shape_tensor column
// (pyarrow.flight's, for one). Its methods may be called from many
// goroutines at once.
type Client struct {
	opts ClientOptions
	// addr is the address Dial was given, the one whose locations Get
	// follows unless TrustLocation says otherwise.
	addr string
	conn *dlgrpc.Conn
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
	if opts.Streams <= 0 {
		opts.Streams = DefaultStreams
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = DefaultRangeStallTimeout
	}
	conn, err := dlgrpc.Dial("dlflight", addr, opts.shared(), DefaultMaxMessageBytes)
	if err != nil {
		return nil, err
	}
	so := conn.Options()
	opts.Logger, opts.MaxMessageBytes, opts.MaxTensorBytes, opts.Allocator = so.Logger, so.MaxMessageBytes, so.MaxTensorBytes, so.Allocator
	return &Client{opts: opts, addr: addr, conn: conn, fc: flight.NewFlightServiceClient(conn)}, nil
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

func (c *Client) ctx(ctx context.Context) context.Context { return c.conn.Outgoing(ctx) }

// maxGet is the bound on the bytes one Get receives (0: none).
func (c *Client) maxGet() int64 { return max(c.opts.MaxTensorBytes, 0) }

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
	schema, err := deserializeSchema(fi.Schema)
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
			if c.maxGet() > 0 && l.nbytes > c.maxGet() {
				return nil, fmt.Errorf("dlflight: get %q: %w: the tensor's %d bytes exceed MaxTensorBytes %d", name, errLimit, l.nbytes, c.maxGet())
			}
			return c.getParallel(ctx, name, l, eps)
		}
	}
	// one endpoint, or a Flight server that describes its streams
	// otherwise or not at all: DoGet of the name
	ctx, tick, stalled, stop := c.watchStall(c.ctx(ctx))
	defer stop()
	stream, err := c.fc.DoGet(ctx, &flight.Ticket{Ticket: []byte(name)})
	if err != nil {
		return nil, stalled(err)
	}
	r := newFrameReader(func(f *inFrame) error { tick(); return stalled(stream.RecvMsg(f)) }, c.opts.Allocator, c.maxGet())
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
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
	if err := c.putStream(c.ctx(ctx), desc, name, e.l, e.data, e); err != nil {
		return fmt.Errorf("dlflight: put %q: %w", name, err)
	}
	return nil
}
