package dlflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultEndpointBytes is Options.EndpointBytes when zero: a tensor
// larger than 64 MiB is described as several endpoints.
const DefaultEndpointBytes = 64 << 20

// DefaultStreams is ClientOptions.Streams when zero.
const DefaultStreams = 4

// rangeMagic starts a range ticket. A tensor name is valid UTF-8
// (checkName), and 0xff never is, so no name is taken for a range.
const rangeMagic = "\xffdlflight-rows\x00"

// rangeJSON is the body of a range ticket and the app_metadata of each
// endpoint a dlflight server lists: rows [From, To) of the tensor's
// first dimension (of its one row for a 0-d tensor).
type rangeJSON struct {
	Name string `json:"name,omitempty"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// RangeTicket is the ticket of rows [from, to) of the first dimension of
// the tensor a dlflight server holds as name: its DoGet streams those
// rows as a tensor of their own (shape [to-from, ...]). Servers list such
// tickets in the endpoints of large tensors (Options.EndpointBytes);
// RegisterRemote takes them to point at ranges of tensors on other
// servers.
func RangeTicket(name string, from, to int64) []byte {
	b, _ := json.Marshal(rangeJSON{Name: name, From: from, To: to})
	return append([]byte(rangeMagic), b...)
}

// parseTicket reads a ticket: a name, or a range of one (ok true).
func parseTicket(t []byte) (r rangeJSON, ok bool, err error) {
	if !bytes.HasPrefix(t, []byte(rangeMagic)) {
		return rangeJSON{Name: string(t)}, false, nil
	}
	if err := json.Unmarshal(t[len(rangeMagic):], &r); err != nil {
		return r, true, status.Errorf(codes.InvalidArgument, "dlflight: range ticket %q: %v", t[len(rangeMagic):], err)
	}
	return r, true, nil
}

// rowsOf is the layout of rows [from, to) of l, as a tensor of its own.
func (l layout) rowsOf(from, to int64) (layout, error) {
	if from < 0 || to < from || to > l.rows {
		return layout{}, &dlpack.FieldError{Field: "ticket.rows", Value: [2]int64{from, to}, Err: ErrShape,
			Why: fmt.Sprintf("not a range of the %d rows of shape %v", l.rows, l.shape)}
	}
	shape := []int64{to - from}
	if len(l.shape) > 1 {
		shape = append(shape, l.rowShape...)
	} else if len(l.shape) == 0 {
		shape = []int64{} // the one row of a 0-d tensor
	}
	return layoutOf(l.dtype, shape)
}

// RemoteRange is rows [From, To) of a tensor that another server holds:
// a Flight location (grpc+tcp://host:port, grpc+tls://host:port; several
// for replicas, tried in order) and the ticket that fetches those rows
// there (the name of a tensor of To-From rows, or a RangeTicket).
type RemoteRange struct {
	From, To  int64
	Locations []string
	Ticket    []byte
}

// split cuts rows into ranges of about per bytes each (at least one row).
func split(l layout, per int64) [][2]int64 {
	if per <= 0 || l.nbytes <= per || l.rows < 2 {
		return [][2]int64{{0, l.rows}}
	}
	n := min((l.nbytes+per-1)/per, l.rows)
	out := make([][2]int64, 0, n)
	for i := int64(0); i < n; i++ {
		out = append(out, [2]int64{l.rows * i / n, l.rows * (i + 1) / n})
	}
	return out
}

// endpoints lists the endpoints of a held tensor.
func (s *Server) endpoints(name string, e *entry) []*flight.FlightEndpoint {
	if e.remote != nil {
		eps := make([]*flight.FlightEndpoint, len(e.remote))
		for i, r := range e.remote {
			md, _ := json.Marshal(rangeJSON{From: r.From, To: r.To})
			ep := &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: r.Ticket}, AppMetadata: md}
			for _, loc := range r.Locations {
				ep.Location = append(ep.Location, &flight.Location{Uri: loc})
			}
			eps[i] = ep
		}
		return eps
	}
	ranges := split(e.l, s.opts.EndpointBytes)
	if len(ranges) == 1 {
		return []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: []byte(name)}}}
	}
	eps := make([]*flight.FlightEndpoint, len(ranges))
	for i, r := range ranges {
		md, _ := json.Marshal(rangeJSON{From: r[0], To: r[1]})
		eps[i] = &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: RangeTicket(name, r[0], r[1])}, AppMetadata: md}
	}
	return eps
}

// RegisterRemote serves under name a tensor of dtype and shape whose
// rows lie on other servers, as ranges: its FlightInfo lists one
// endpoint per range, with the range's locations and ticket, and
// Client.Get fetches each there. The ranges must cover the rows of the
// first dimension in order, without gap or overlap (ErrShape otherwise).
// DoGet of the name itself is refused with codes.FailedPrecondition:
// this server holds none of the bytes. Which server holds which rows,
// and their replicas, is the caller's to decide and keep true.
func (s *Server) RegisterRemote(name string, dtype dlpack.DataType, shape []int64, ranges []RemoteRange) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("dlflight: register %q: %w", name, err)
	}
	l, err := layoutOf(dtype, shape)
	if err != nil {
		return fmt.Errorf("dlflight: register %q: %w", name, err)
	}
	at := int64(0)
	for i, r := range ranges {
		if r.From != at || r.To < r.From || r.To > l.rows {
			return fmt.Errorf("dlflight: register %q: %w", name, &dlpack.FieldError{Field: fmt.Sprintf("ranges[%d]", i),
				Value: [2]int64{r.From, r.To}, Err: ErrShape, Why: fmt.Sprintf("the ranges must cover rows 0 to %d in order; this one should start at %d", l.rows, at)})
		}
		if len(r.Locations) == 0 {
			return fmt.Errorf("dlflight: register %q: %w", name, &dlpack.FieldError{Field: fmt.Sprintf("ranges[%d].locations", i),
				Value: r.Locations, Err: ErrShape, Why: "a remote range needs a location"})
		}
		at = r.To
	}
	if at != l.rows {
		return fmt.Errorf("dlflight: register %q: %w", name, &dlpack.FieldError{Field: "ranges", Value: at, Err: ErrShape,
			Why: fmt.Sprintf("cover rows up to %d of %d", at, l.rows)})
	}
	e := &entry{l: l, remote: append([]RemoteRange(nil), ranges...)}
	e.refs.Store(1)
	return s.store(name, e, false)
}

// placer is the allocator of one endpoint's stream in a parallel Get:
// a message body goes straight into the endpoint's slice of the
// destination, at the place of the next rows, when it fits there (the
// codec then copies it out of gRPC's frames into its final place, and
// nothing copies it again); a body that does not fit (more bytes than
// the rows left, from a peer's odd layout) comes from alloc and is
// copied into place.
//
// The allocator is asked for the body's length rounded up to 64 bytes;
// the codec tells the exact length first (next), and only that many
// bytes are ever written. dest's capacity reaches up to 64 bytes past
// its length (into the next endpoint's slice, or the destination's
// spare end) so that the rounded allocation of a final batch fits; those
// bytes are never written through it.
type placer struct {
	dest  []byte
	at    int
	next  int
	alloc memory.Allocator
}

func (p *placer) owns(b []byte) bool {
	if len(b) == 0 || len(p.dest) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(p.dest)))
	x := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return x >= lo && x < lo+uintptr(cap(p.dest))
}

func (p *placer) Allocate(n int) []byte {
	next := p.next
	p.next = 0
	if next > 0 && next <= n && p.at+next <= len(p.dest) && p.at+n <= cap(p.dest) {
		return p.dest[p.at : p.at+n : p.at+n]
	}
	return p.alloc.Allocate(n)
}

func (p *placer) Reallocate(n int, b []byte) []byte {
	if !p.owns(b) {
		return p.alloc.Reallocate(n, b)
	}
	nb := p.alloc.Allocate(n)
	copy(nb, b)
	return nb
}

func (p *placer) Free(b []byte) {
	if !p.owns(b) {
		p.alloc.Free(b)
	}
}

// receiveInto reads a stream of rows rows of l's row layout into
// p.dest, which holds exactly their bytes.
func receiveInto(r *frameReader, p *placer, l layout, rows int64) (err error) {
	defer func() {
		if err != nil {
			r.reclaim()
		}
	}()
	defer r.Release()
	rdr, err := ipc.NewReaderFromMessageReader(r, ipc.WithAllocator(p))
	if err != nil {
		return streamErr(r, err)
	}
	defer rdr.Release()
	got, err := checkSchema(rdr.Schema())
	if err != nil {
		return err
	}
	if got.dtype != l.dtype || got.width != l.width {
		return &dlpack.FieldError{Field: "schema", Value: fmt.Sprintf("%v rows of %v", got.dtype, got.rowShape), Err: ErrInvalid,
			Why: fmt.Sprintf("the tensor has %v rows of %v", l.dtype, l.rowShape)}
	}
	if got.rows >= 0 && got.rows != rows && !(len(l.shape) == 0 && got.rows == 1) {
		return &dlpack.FieldError{Field: MetaShape, Value: got.shape, Err: ErrInvalid, Why: fmt.Sprintf("the endpoint holds %d rows", rows)}
	}
	n := int64(0)
	for rdr.Next() {
		pc, err := checkBatch(got, rdr.RecordBatch())
		if err != nil {
			return err
		}
		if n+pc.rows > rows || n+pc.rows < n {
			return fmt.Errorf("%w: more rows than the %d of the endpoint", ErrInvalid, rows)
		}
		if len(pc.data) > 0 {
			dst := p.dest[p.at : p.at+len(pc.data)]
			if unsafe.SliceData(dst) != unsafe.SliceData(pc.data) {
				copy(dst, pc.data)
			}
		}
		p.at += len(pc.data)
		n += pc.rows
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return streamErr(r, err)
	}
	if n != rows {
		return fmt.Errorf("%w: %d rows arrived of the endpoint's %d", ErrInvalid, n, rows)
	}
	return nil
}

// addrOf is the host:port of a Flight location, and whether it is TLS.
func addrOf(uri string) (string, bool, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", false, err
	}
	switch u.Scheme {
	case "grpc", "grpc+tcp":
		return u.Host, false, nil
	case "grpc+tls":
		return u.Host, true, nil
	}
	return "", false, fmt.Errorf("scheme %q: grpc, grpc+tcp or grpc+tls expected", u.Scheme)
}

// peerFor is the Client of a location: c itself when the location is
// empty or the reuse-connection URI, else a Client dialled with c's
// options (TLS and token included) and kept until c is closed.
func (c *Client) peerFor(uri string) (*Client, error) {
	if uri == "" || strings.HasPrefix(uri, "arrow-flight-reuse-connection:") {
		return c, nil
	}
	addr, tls, err := addrOf(uri)
	if err != nil {
		return nil, fmt.Errorf("location %q: %w", uri, err)
	}
	if tls && c.opts.TLS == nil {
		return nil, fmt.Errorf("location %q: a TLS location, and the client has no TLS configuration", uri)
	}
	if !tls && c.opts.TLS != nil {
		return nil, fmt.Errorf("location %q: a plaintext location, and the client speaks TLS", uri)
	}
	if err := c.trust(addr, tls); err != nil {
		return nil, fmt.Errorf("location %q: %w", uri, err)
	}
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if c.closed.Load() {
		return nil, fmt.Errorf("%w: the client is closed", dlpack.ErrClosed)
	}
	if p := c.peers[addr]; p != nil {
		return p, nil
	}
	p, err := Dial(addr, c.opts)
	if err != nil {
		return nil, err
	}
	if c.peers == nil {
		c.peers = map[string]*Client{}
	}
	c.peers[addr] = p
	return p, nil
}

// trust is nil when Get may dial addr with the client's options (its
// token included): ClientOptions.TrustLocation says so, or, without one,
// addr is the address the client was dialled with.
func (c *Client) trust(addr string, tls bool) error {
	if c.opts.TrustLocation != nil {
		if c.opts.TrustLocation(addr, tls) {
			return nil
		}
		return fmt.Errorf("%w: ClientOptions.TrustLocation refused %s", ErrLocation, addr)
	}
	if sameAddr(addr, c.addr) {
		return nil
	}
	return fmt.Errorf("%w: %s is not the address the client was dialled with (%s); ClientOptions.TrustLocation names the others Get may send the client's token to", ErrLocation, addr, c.addr)
}

// sameAddr reports whether two "host:port" addresses are the same as
// written (the host in any case).
func sameAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return strings.EqualFold(a, b)
	}
	return strings.EqualFold(ha, hb) && pa == pb
}

// endpoint is one endpoint of a Get: its rows and where to fetch them.
type endpoint struct {
	from, to  int64
	locations []string
	ticket    []byte
}

// getParallel fetches the endpoints of fi into one aligned buffer,
// on up to Streams streams at once.
func (c *Client) getParallel(ctx context.Context, name string, l layout, eps []endpoint) (*Tensor, error) {
	buf := memory.NewResizableBuffer(c.opts.Allocator)
	buf.Resize(int(l.nbytes) + Align) // the last endpoint's slack (placer)
	all := buf.Bytes()
	data := all[:l.nbytes:l.nbytes]
	rb := l.rowBytes()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Streams)
	for i, ep := range eps {
		lo, hi := ep.from*rb, ep.to*rb
		g.Go(func() error {
			if err := c.fetchEndpoint(gctx, l, ep, all[lo:hi:hi+Align]); err != nil {
				return fmt.Errorf("endpoint %d (rows %d to %d, %s): %w", i, ep.from, ep.to, where(ep.locations), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		buf.Release()
		return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		buf.Release()
		return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
	}
	t, err := dlgrpc.NewTensor(l.dtype, l.shape, data, false, buf.Release)
	if err != nil {
		buf.Release()
		return nil, fmt.Errorf("dlflight: get %q: %w", name, err)
	}
	return t, nil
}

func where(locations []string) string {
	if len(locations) == 0 {
		return "this server"
	}
	return strings.Join(locations, " or ")
}

// fetchEndpoint fetches ep into dest, trying its locations in order
// (replicas) until one succeeds.
func (c *Client) fetchEndpoint(ctx context.Context, l layout, ep endpoint, dest []byte) error {
	locs := ep.locations
	if len(locs) == 0 {
		locs = []string{""}
	}
	var errs []error
	for _, loc := range locs {
		p, err := c.peerFor(loc)
		if err == nil {
			err = p.fetchRange(ctx, l, ep, dest)
		}
		if err == nil {
			return nil
		}
		if len(locs) > 1 {
			err = fmt.Errorf("%s: %w", loc, err)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// fetchRange fetches the rows of ep from c's server into dest. A stream
// that makes no progress for StallTimeout fails with ErrStalled, and
// fetchEndpoint tries the next replica.
func (c *Client) fetchRange(ctx context.Context, l layout, ep endpoint, dest []byte) error {
	ctx, tick, stalled, stop := c.watchStall(c.ctx(ctx))
	defer stop()
	stream, err := c.fc.DoGet(ctx, &flight.Ticket{Ticket: ep.ticket})
	if err != nil {
		return stalled(err)
	}
	p := &placer{dest: dest, alloc: c.opts.Allocator}
	r := newFrameReader(func(f *inFrame) error { tick(); return stalled(stream.RecvMsg(f)) }, p, c.maxGet())
	return receiveInto(r, p, l, ep.to-ep.from)
}

// endpointsOf reads the endpoints of a FlightInfo for a tensor of l:
// ok false when it is a single endpoint on this server (fetched as the
// whole stream it is).
func endpointsOf(fi *flight.FlightInfo, l layout) ([]endpoint, bool, error) {
	if len(fi.Endpoint) == 0 {
		return nil, false, fmt.Errorf("%w: the flight info lists no endpoint", ErrInvalid)
	}
	if len(fi.Endpoint) == 1 && len(fi.Endpoint[0].Location) == 0 {
		return nil, false, nil
	}
	eps := make([]endpoint, len(fi.Endpoint))
	at := int64(0)
	for i, fe := range fi.Endpoint {
		var r rangeJSON
		if len(fi.Endpoint) == 1 && len(fe.AppMetadata) == 0 {
			r = rangeJSON{From: 0, To: l.rows}
		} else if err := json.Unmarshal(fe.AppMetadata, &r); err != nil {
			return nil, false, &dlpack.FieldError{Field: fmt.Sprintf("endpoint[%d].app_metadata", i), Value: string(fe.AppMetadata), Err: ErrInvalid,
				Why: `several endpoints need their rows, {"from":..,"to":..}`}
		}
		if r.From != at || r.To < r.From || r.To > l.rows {
			return nil, false, &dlpack.FieldError{Field: fmt.Sprintf("endpoint[%d].rows", i), Value: [2]int64{r.From, r.To}, Err: ErrInvalid,
				Why: fmt.Sprintf("the endpoints must cover rows 0 to %d in order; this one should start at %d", l.rows, at)}
		}
		at = r.To
		eps[i] = endpoint{from: r.From, to: r.To, ticket: fe.GetTicket().GetTicket()}
		for _, loc := range fe.Location {
			eps[i].locations = append(eps[i].locations, loc.GetUri())
		}
	}
	if at != l.rows {
		return nil, false, &dlpack.FieldError{Field: "endpoint.rows", Value: at, Err: ErrInvalid, Why: fmt.Sprintf("the endpoints cover %d of %d rows", at, l.rows)}
	}
	return eps, true, nil
}
