package dlflight

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A tensor above EndpointBytes is listed as several endpoints, each a
// range of rows; Get fetches them on parallel streams straight into one
// aligned buffer: every message body but (at most) the last of each
// endpoint is received in its final place, and the tensor is the one
// registered, bit for bit.
func TestParallelEndpoints(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{EndpointBytes: 256 << 10, MaxMessageBytes: 64<<10 + batchOverhead})
	c := dial(t, addr, ClientOptions{Streams: 3, Allocator: alloc, MaxMessageBytes: 64<<10 + batchOverhead})
	var mu sync.Mutex
	var bodies [][2]uintptr
	recvHook = func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if len(b) > 0 {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			bodies = append(bodies, [2]uintptr{p, p + uintptr(len(b))})
		}
	}
	t.Cleanup(func() { recvHook = nil })
	for _, tc := range []struct {
		dt    dlpack.DataType
		shape []int64
	}{
		{dlpack.Float32, []int64{1000, 300}},
		{dlpack.Int16, []int64{300001}},
		{dlpack.Uint8, []int64{41, 10000}},
		{dlpack.Float64, []int64{30, 5, 7, 100}},
		{dlpack.Int8, []int64{100}}, // one endpoint
	} {
		name := fmt.Sprint(tc.dt, tc.shape)
		src := newRaw(t, tc.dt, tc.shape...)
		if err := s.Register(name, src); err != nil {
			t.Fatal(err)
		}
		fi, err := s.GetFlightInfo(ctxT(t), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		bodies = bodies[:0]
		mu.Unlock()
		got, err := c.Get(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, got, src)
		if !got.Aligned() {
			t.Fatalf("%s: data at %#x", name, got.DataAddr())
		}
		lo, hi := got.DataAddr(), got.DataAddr()+uintptr(len(got.Bytes()))
		placed := 0
		mu.Lock()
		for _, b := range bodies {
			if b[0] >= lo && b[1] <= hi {
				placed++
			}
		}
		n := len(bodies)
		mu.Unlock()
		eps := len(fi.Endpoint)
		t.Logf("%s: %d endpoints, %d of %d bodies received in place", name, eps, placed, n)
		if len(src.data) > 256<<10 && (eps < 2 || placed < n-eps) {
			t.Fatalf("%s: %d endpoints, %d of %d bodies in place", name, eps, placed, n)
		}
		got.Close()
		// the name still streams the whole tensor, as to any Flight client
		whole, err := c.fetchWhole(name)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, whole, src)
		whole.Close()
	}
	alloc.AssertSize(t, 0)
}

// fetchWhole is a DoGet of the name, as before endpoints.
func (c *Client) fetchWhole(name string) (*Tensor, error) {
	stream, err := c.fc.DoGet(c.ctx(context.Background()), &flight.Ticket{Ticket: []byte(name)})
	if err != nil {
		return nil, err
	}
	r := newFrameReader(func(f *inFrame) error { return stream.RecvMsg(f) }, c.opts.Allocator, 0)
	return receive(r, c.opts.Allocator)
}

// A range ticket outside the tensor's rows is refused; a ranged DoGet of
// a 1-d tensor is a 1-d tensor of those rows.
func TestRangeTicket(t *testing.T) {
	s, addr := serve(t, Options{})
	src := newRaw(t, dlpack.Int32, 10)
	if err := s.Register("v", src); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr, ClientOptions{})
	for _, r := range [][2]int64{{-1, 2}, {3, 2}, {0, 11}} {
		_, err := c.fetchTicket(RangeTicket("v", r[0], r[1]))
		if err == nil || !strings.Contains(err.Error(), "ticket.rows") {
			t.Fatalf("rows %v: %v", r, err)
		}
	}
	got, err := c.fetchTicket(RangeTicket("v", 2, 5))
	if err != nil {
		t.Fatal(err)
	}
	if sh := got.Shape(); len(sh) != 1 || sh[0] != 3 || string(got.Bytes()) != string(src.data[8:20]) {
		t.Fatalf("rows 2 to 5: shape %v", sh)
	}
	got.Close()
	if _, err := c.fetchTicket([]byte(rangeMagic + "{")); err == nil {
		t.Fatal("a malformed range ticket was served")
	}
}

func (c *Client) fetchTicket(ticket []byte) (*Tensor, error) {
	stream, err := c.fc.DoGet(c.ctx(context.Background()), &flight.Ticket{Ticket: ticket})
	if err != nil {
		return nil, err
	}
	r := newFrameReader(func(f *inFrame) error { return stream.RecvMsg(f) }, c.opts.Allocator, 0)
	return receive(r, c.opts.Allocator)
}

// noInfo is a Flight server whose GetFlightInfo fails as some servers'
// do for a path they stream under another description.
type noInfo struct{ *Server }

func (noInfo) GetFlightInfo(context.Context, *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return nil, status.Error(codes.InvalidArgument, "describe by command only")
}

// Get falls back to a DoGet of the name when GetFlightInfo fails for a
// reason other than credentials, context or connection.
func TestGetWithoutFlightInfo(t *testing.T) {
	s := NewServer(Options{})
	src := newRaw(t, dlpack.Float64, 6, 7)
	if err := s.Register("x", src); err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.ForceServerCodecV2(dlgrpc.Codec()))
	flight.RegisterFlightServiceServer(g, noInfo{s})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(func() { g.Stop(); s.Shutdown() })
	got, err := dial(t, lis.Addr().String(), ClientOptions{}).Get(ctxT(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
}
