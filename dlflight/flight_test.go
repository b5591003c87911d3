package dlflight

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
)

var shapes = [][]int64{{3, 4, 5}, {7}, {}, {0, 3}, {2, 1, 1, 6}}

// TestGoToGo registers, lists, fetches and puts a tensor of every
// element type and several shapes, bit for bit.
func TestGoToGo(t *testing.T) {
	salloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	calloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: salloc})
	c := dial(t, addr, ClientOptions{Allocator: calloc})
	ctx := ctxT(t)
	var regs []*rawTensor
	for _, dt := range allDTypes {
		for _, shape := range shapes {
			name := fmt.Sprintf("%v%v", dt, shape)
			src := newRaw(t, dt, shape...)
			regs = append(regs, src)
			if err := s.Register(name, src); err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if info.DType != dt || fmt.Sprint(info.Shape) != fmt.Sprint(shape) || info.Bytes != int64(len(src.data)) || info.Name != name {
				t.Fatalf("Info %+v for %s", info, name)
			}
			got, err := c.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, got, src)
			if !got.Aligned() {
				t.Fatalf("%s: received data at %#x", name, got.DataAddr())
			}
			// Go to Go through DLPack's protocol: the received bytes, shared
			f, err := dlpack.From(got)
			if err != nil {
				t.Fatal(err)
			}
			if f.DataAddr() != got.DataAddr() && f.NBytes() > 0 {
				t.Fatalf("From copied: %#x vs %#x", f.DataAddr(), got.DataAddr())
			}
			// and back: Put the received tensor, Get it under another name
			if err := c.Put(ctx, "put/"+name, got); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got.Close()
			again, err := c.Get(ctx, "put/"+name)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, again, src)
			again.Close()
		}
	}
	infos, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(allDTypes) * len(shapes); len(infos) != want {
		t.Fatalf("List: %d, want %d", len(infos), want)
	}
	calloc.AssertSize(t, 0)
	s.Shutdown()
	for _, r := range regs {
		if r.released.Load() != 1 {
			t.Fatalf("%v%v released %d times", r.dt, r.shape, r.released.Load())
		}
	}
	salloc.AssertSize(t, 0)
}

// TestReleaseOnce: a registered tensor is released once when replaced,
// unregistered or at shutdown, never while a DoGet holds it.
func TestReleaseOnce(t *testing.T) {
	s, addr := serve(t, Options{})
	c := dial(t, addr, ClientOptions{})
	a, b, d := newRaw(t, dlpack.Float32, 4, 4), newRaw(t, dlpack.Float32, 4, 4), newRaw(t, dlpack.Int8, 9)
	for _, step := range []struct {
		name string
		p    *rawTensor
	}{{"x", a}, {"x", b}, {"y", d}} {
		if err := s.Register(step.name, step.p); err != nil {
			t.Fatal(err)
		}
	}
	if a.released.Load() != 1 || b.released.Load() != 0 {
		t.Fatalf("replaced: %d, kept: %d", a.released.Load(), b.released.Load())
	}
	got, err := c.Get(ctxT(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, b)
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.Unregister("x") || s.Unregister("x") {
		t.Fatal("Unregister twice")
	}
	if b.released.Load() != 1 {
		t.Fatalf("unregistered: released %d", b.released.Load())
	}
	_, err = c.Get(ctxT(t), "x")
	wantCode(t, err, codes.NotFound)
	s.Shutdown()
	if d.released.Load() != 1 || a.released.Load() != 1 {
		t.Fatalf("shutdown: %d %d", d.released.Load(), a.released.Load())
	}
	if err := s.Register("z", newRaw(t, dlpack.Int8, 1)); err == nil {
		t.Fatal("Register after Shutdown")
	}
}

// TestSplit sends tensors larger than the message limit: split along the
// first dimension both ways, put back together.
func TestSplit(t *testing.T) {
	limit := batchOverhead + 4096
	s, addr := serve(t, Options{MaxMessageBytes: limit})
	c := dial(t, addr, ClientOptions{MaxMessageBytes: limit})
	src := newRaw(t, dlpack.Float32, 1000, 16) // 64000 bytes: 16 batches of 64 rows
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	frames := 0
	recvHook = func([]byte) { frames++ }
	defer func() { recvHook = nil }()
	got, err := c.Get(ctxT(t), "big")
	if err != nil {
		t.Fatal(err)
	}
	if frames != 16 {
		t.Fatalf("%d batches, want 16", frames)
	}
	sameTensor(t, got, src)
	if err := c.Put(ctxT(t), "big2", got); err != nil {
		t.Fatal(err)
	}
	got.Close()
	again, err := c.Get(ctxT(t), "big2")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, again, src)
	again.Close()
	// a row larger than a message cannot be split
	wide := newRaw(t, dlpack.Float64, 2, 1024)
	err = c.Put(ctxT(t), "wide", wide)
	if !errors.Is(err, errLimit) {
		t.Fatalf("wide row: %v", err)
	}
}

// TestNoCopy proves with addresses where the bytes go: DoGet's batch body
// is the registered tensor's own memory (no copy before gRPC), and the
// received Tensor's data lies inside the body buffer the codec filled.
func TestNoCopy(t *testing.T) {
	s, addr := serve(t, Options{})
	c := dial(t, addr, ClientOptions{})
	src := newRaw(t, dlpack.Float32, 256, 256)
	if err := s.Register("t", src); err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	var bodies [][]byte
	sendHook = func(parts [][]byte) {
		if len(parts) > 0 {
			sent = append(sent, parts[0])
		}
	}
	recvHook = func(b []byte) { bodies = append(bodies, b) }
	defer func() { sendHook, recvHook = nil, nil }()
	got, err := c.Get(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if len(sent) != 1 || unsafe.SliceData(sent[0]) != unsafe.SliceData(src.data) || len(sent[0]) != len(src.data) {
		t.Fatalf("the sent body is not the registered memory: %d parts", len(sent))
	}
	if len(bodies) != 1 {
		t.Fatalf("%d bodies received", len(bodies))
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(bodies[0])))
	hi := lo + uintptr(len(bodies[0]))
	if a := got.DataAddr(); a < lo || a+uintptr(len(src.data)) > hi {
		t.Fatalf("the tensor at %#x is not inside the received body [%#x, %#x)", a, lo, hi)
	}
	if got.DataAddr()%Align != 0 {
		t.Fatalf("received data at %#x", got.DataAddr())
	}
	sameTensor(t, got, src)
	// Put: the frame's body is the producer's memory
	sent = nil
	if err := c.Put(ctxT(t), "back", src); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || unsafe.SliceData(sent[0]) != unsafe.SliceData(src.data) {
		t.Fatal("Put did not send the producer's memory")
	}
}

// TestRegisterRefuses: what has no fixed_shape_tensor form is refused and
// nothing is held.
func TestRegisterRefuses(t *testing.T) {
	s := NewServer(Options{})
	defer s.Shutdown()
	for _, c := range []struct {
		p    *rawTensor
		want error
	}{
		{newRaw(t, dlpack.Bool, 4), ErrType},
		{newRaw(t, dlpack.Complex64, 4), ErrType},
		{newRaw(t, dlpack.Float32, 4, 0), ErrShape},
	} {
		err := s.Register("x", c.p)
		if !errors.Is(err, c.want) {
			t.Fatalf("%v %v: %v, want %v", c.p.dt, c.p.shape, err, c.want)
		}
		if c.p.released.Load() != c.p.exports.Load() {
			t.Fatalf("%v: %d exports, %d released", c.p.dt, c.p.exports.Load(), c.p.released.Load())
		}
	}
	if len(s.Names()) != 0 {
		t.Fatal(s.Names())
	}
}
