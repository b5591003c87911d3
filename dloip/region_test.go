package dloip

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Shared memory from Go in a few calls: a Region is created, sized and
// mapped; tensors are views of it; registered with a Client, an input
// whose tensor lies in it goes by reference (the server's input is the
// region itself, read-only), and an output asked for in it is written
// there. Close removes the object, and the mapping goes when the last
// tensor of it is released.
func TestRegion(t *testing.T) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skip("no /dev/shm")
	}
	var byRef bool
	m := ModelFunc(ModelMetadata{Name: "double", Inputs: []TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
		Outputs: []TensorMetadata{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}}},
		func(_ context.Context, req *Request) ([]Output, error) {
			x := req.Input("x")
			byRef = x.ReadOnly() // a region's memory, not received bytes
			f, err := dlpack.From(x)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			xs, err := dlpack.ReadOnlySlice[float32](f)
			if err != nil {
				return nil, err
			}
			ys := make([]float32, len(xs))
			for i, v := range xs {
				ys[i] = 2 * v
			}
			return []Output{{Name: "y", Tensor: dlpack.NewArray(ys, []int64{int64(len(ys))})}}, nil
		})
	_, addr := serve(t, Options{}, m)
	c := dial(t, addr, ClientOptions{})
	key := fmt.Sprintf("dloip-region-%d", os.Getpid())
	r, err := CreateRegion(key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateRegion(key, 64); err == nil {
		t.Fatal("a region created twice")
	}
	x, err := r.Tensor(0, dlpack.Float32, []int64{1000})
	if err != nil {
		t.Fatal(err)
	}
	xs := unsafe.Slice((*float32)(unsafe.Pointer(&r.Bytes()[0])), 1000)
	for i := range xs {
		xs[i] = float32(i)
	}
	if err := c.RegisterRegion(ctxT(t), "mem", r); err != nil {
		t.Fatal(err)
	}
	out := r.Bytes()[4096 : 4096+4000]
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "double", Inputs: []Input{{Name: "x", Tensor: x}},
		Outputs: []RequestedOutput{{Name: "y", Region: "mem", Offset: 4096, Memory: out}}})
	if err != nil {
		t.Fatal(err)
	}
	y := resp.Output("y")
	ys := unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), 1000)
	if !byRef || ys[999] != 1998 || y.DataAddr() != uintptr(unsafe.Pointer(&out[0])) {
		t.Fatalf("by reference %v, y[999] = %v, the output at %#x", byRef, ys[999], y.DataAddr())
	}
	resp.Close()
	// a tensor not in a registered region goes by value, as before
	c.UnregisterRegion(ctxT(t), "mem")
	resp, err = c.Infer(ctxT(t), &InferRequest{Model: "double", Inputs: []Input{{Name: "x", Tensor: x}}})
	if err != nil || byRef {
		t.Fatalf("%v, by reference %v", err, byRef)
	}
	resp.Close()
	// the mapping outlives Close while a tensor holds it
	f, err := dlpack.From(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shmDir + "/" + key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the object is still there: %v", err)
	}
	if v, _ := dlpack.ReadOnlySlice[float32](f); v[999] != 999 {
		t.Fatal("the mapping went with Close")
	}
	f.Close()
	if _, err := dlpack.From(x); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("a tensor of a closed region: %v", err)
	}
	// refusals
	for _, k := range []string{"", "a/b", ".."} {
		if _, err := CreateRegion(k, 64); !errors.Is(err, ErrInvalid) {
			t.Fatalf("key %q: %v", k, err)
		}
	}
	r2, err := CreateRegion(key+"-2", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Tensor(60, dlpack.Float32, []int64{2}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := r2.Tensor(2, dlpack.Float32, []int64{2}); !errors.Is(err, dlpack.ErrAlignment) {
		t.Fatalf("misaligned: %v", err)
	}
}
