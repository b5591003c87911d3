package dlflight

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
)

// A Put with PutRangeBytes sends ranges on parallel DoPuts; the server
// stores the tensor, bit for bit, once every range has arrived, and
// nothing else stays allocated.
func TestParallelPut(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: alloc})
	c := dial(t, addr, ClientOptions{PutRangeBytes: 64 << 10, Streams: 3})
	for _, src := range []*rawTensor{
		newRaw(t, dlpack.Float32, 1000, 100),
		newRaw(t, dlpack.Int16, 100001),
		newRaw(t, dlpack.Uint8, 3, 50000),
		newRaw(t, dlpack.Int8, 10), // one range: a plain DoPut
	} {
		if err := c.Put(ctxT(t), "p", src); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctxT(t), "p")
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, got, src)
		got.Close()
	}
	s.mu.Lock()
	n := len(s.uploads)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d uploads left", n)
	}
	s.Shutdown()
	alloc.AssertSize(t, 0)
}

// rangePut sends rows [from, to) of src as one range of upload id of a
// tensor of shape (src's unless given).
func rangePut(t *testing.T, c *Client, id string, src *rawTensor, from, to int64, shape ...int64) error {
	t.Helper()
	if shape == nil {
		shape = src.shape
	}
	cmd, _ := json.Marshal(putJSON{Name: "r", Upload: id, DType: src.dt.String(), Shape: shape, From: from, To: to})
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: append([]byte(putMagic), cmd...)}
	l, err := layoutOf(src.dt, src.shape)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := l.rowsOf(from, to)
	if err != nil {
		t.Fatal(err)
	}
	e, err := hold(src)
	if err != nil {
		t.Fatal(err)
	}
	defer e.drop()
	rb := l.rowBytes()
	return c.putStream(ctxT(t), desc, "r", rl, e.data[from*rb:to*rb], e)
}

// Range puts that lie are refused, their upload dropped and its buffer
// released; an upload left incomplete is dropped after the timeout.
func TestRangePutRefusals(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: alloc, StallTimeout: 200 * time.Millisecond, MaxTensorBytes: 1 << 20,
		Allow: func(_ string, op dlgrpc.Op, name string) bool { return op == dlgrpc.OpRead || name != "ro" }})
	c := dial(t, addr, ClientOptions{})
	src := newRaw(t, dlpack.Float32, 10, 4)
	uploads := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.uploads)
	}
	// overlapping rows
	if err := rangePut(t, c, "a", src, 0, 6); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rangePut(t, c, "a", src, 5, 10), codes.InvalidArgument)
	// another shape under the same upload
	if err := rangePut(t, c, "b", src, 0, 5); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rangePut(t, c, "b", newRaw(t, dlpack.Float32, 12, 4), 5, 10, 12, 4), codes.InvalidArgument)
	// a stream of other rows than the range says
	wantCode(t, rangePut(t, c, "c", newRaw(t, dlpack.Float32, 10, 5), 0, 5, 10, 4), codes.InvalidArgument)
	// rows outside the tensor, a bad upload id, a bad command
	for _, cmd := range []string{
		`{"name":"r","upload":"d","dtype":"float32","shape":[10,4],"from":5,"to":11}`,
		`{"name":"r","upload":"d","dtype":"float32","shape":[10,4],"from":5,"to":5}`,
		`{"name":"r","upload":"","dtype":"float32","shape":[10,4],"from":0,"to":5}`,
		`{"name":"r","upload":"d","dtype":"bool","shape":[10,4],"from":0,"to":5}`,
		`{"name":"\xff","upload":"d","dtype":"float32","shape":[10,4],"from":0,"to":5}`,
		`{`,
	} {
		desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: append([]byte(putMagic), cmd...)}
		l, _ := layoutOf(dlpack.Float32, []int64{5, 4})
		e, _ := hold(src)
		err := c.putStream(ctxT(t), desc, "r", l, e.data[:80], e)
		e.drop()
		wantCode(t, err, codes.InvalidArgument)
	}
	// the policy and the put limit
	cmd, _ := json.Marshal(putJSON{Name: "ro", Upload: "e", DType: "float32", Shape: []int64{10, 4}, From: 0, To: 5})
	l, _ := layoutOf(dlpack.Float32, []int64{5, 4})
	e, _ := hold(src)
	err := c.putStream(ctxT(t), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: append([]byte(putMagic), cmd...)}, "ro", l, e.data[:80], e)
	e.drop()
	wantCode(t, err, codes.PermissionDenied)
	wantCode(t, rangePut(t, c, "f", newRaw(t, dlpack.Float32, 1000, 1000), 0, 1), codes.ResourceExhausted)
	// uploads under way together are bounded too: a tiny range of a
	// huge tensor does not claim its memory
	big := newRaw(t, dlpack.Float32, 2, 4)
	wantCode(t, rangePut(t, c, "f2", big, 0, 1, 1<<40, 4), codes.ResourceExhausted)

	// the incomplete uploads ("a", rows 0 to 6 received, "b" and "g")
	// are never stored, and after the timeout nothing is held
	if err := rangePut(t, c, "g", src, 0, 5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "holding incomplete uploads", func() bool { return uploads() == 0 && alloc.CurrentAlloc() == 0 })
	if names := s.Names(); len(names) != 0 {
		t.Fatalf("stored: %v", names)
	}
	// a late range of a dropped upload does not complete it
	if err := rangePut(t, c, "g", src, 5, 10); err != nil {
		t.Fatal(err)
	}
	if names := s.Names(); len(names) != 0 {
		t.Fatalf("stored: %v", names)
	}
	// and a complete upload is stored
	if err := rangePut(t, c, "h", src, 5, 10); err != nil {
		t.Fatal(err)
	}
	if err := rangePut(t, c, "h", src, 0, 5); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	s.Shutdown()
	alloc.AssertSize(t, 0)
}
