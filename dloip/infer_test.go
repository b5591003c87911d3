package dloip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every datatype both ways, at rank 0, 1 and 3, zero-size too: the bytes
// that come back are the bytes sent, and the producers are released.
func TestRoundTripDatatypes(t *testing.T) {
	// a Dynamic model takes any input, of any shape
	_, addr := serve(t, Options{}, ModelFunc(ModelMetadata{Name: "echo", Dynamic: true}, echo))
	c := dial(t, addr, ClientOptions{})
	for _, shape := range [][]int64{{}, {5}, {2, 0, 3}, {3, 70000}} {
		var req InferRequest
		req.Model = "echo"
		req.ID = fmt.Sprint("req", len(shape))
		raws := map[string]*testTensor{}
		for _, d := range Datatypes() {
			dt, _ := ParseDatatype(d)
			r := newRaw(t, dt, shape...)
			raws["x_"+d] = r
			req.Inputs = append(req.Inputs, Input{Name: "x_" + d, Tensor: r})
		}
		resp, err := c.Infer(ctxT(t), &req)
		if err != nil {
			t.Fatalf("shape %v: %v", shape, err)
		}
		if resp.ID != req.ID || resp.Model != "echo" {
			t.Errorf("id %q model %q", resp.ID, resp.Model)
		}
		for name, r := range raws {
			out := resp.Output(name)
			if out == nil {
				t.Fatalf("no output %q", name)
			}
			if !bytes.Equal(out.Bytes(), r.data) || fmt.Sprint(out.Shape()) != fmt.Sprint(r.shape) || out.DataType() != r.dt {
				t.Fatalf("%s %v: got %v %v", name, shape, out.DataType(), out.Shape())
			}
			if !out.Aligned() {
				t.Errorf("%s: not aligned", name)
			}
			f, err := dlpack.From(out)
			if err != nil {
				t.Fatal(err)
			}
			b, first, _ := dlpack.ReadOnlyBytes(f)
			if len(r.data) > 0 && !bytes.Equal(b[first:first+len(r.data)], r.data) {
				t.Fatalf("%s: DLPack view differs", name)
			}
			f.Close()
			if n := r.released.Load(); n != 1 {
				t.Errorf("%s: released %d times", name, n)
			}
		}
		resp.Close()
	}
}

// A strided producer goes out compact (one copy), with its elements in
// row-major order.
func TestNonCompactInput(t *testing.T) {
	_, addr := serve(t, Options{}, echoModel("echo", TensorMetadata{Name: "x", Datatype: "INT32", Shape: []int64{3, 2}}))
	c := dial(t, addr, ClientOptions{})
	xs := []int32{1, 2, 3, 4, 5, 6}
	r := &testTensor{dt: dlpack.Int32, shape: []int64{3, 2}, strides: []int64{1, 3}, released: new(atomic.Int32)}
	r.data = unsafeBytes(xs)
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: r}}})
	if errors.Is(err, dlpack.ErrCgoRequired) {
		t.Skip("the compact copy is a dlpack.Buffer, which needs cgo")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	got, err := dlpack.From(resp.Output("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	ys, err := dlpack.ReadOnlySlice[int32](got)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ys) != "[1 4 2 5 3 6]" {
		t.Fatalf("got %v", ys)
	}
}

func TestHealthAndMetadata(t *testing.T) {
	meta := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}
	_, addr := serve(t, Options{Name: "test", Version: "1.2"}, echoModel("echo", meta))
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	if ok, err := c.ServerLive(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := c.ServerReady(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := c.ModelReady(ctx, "echo", ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// an unknown model is NotFound, as kserve answers
	if ok, err := c.ModelReady(ctx, "nope", ""); ok || status.Code(err) != codes.NotFound {
		t.Fatal(ok, err)
	}
	if ok, err := c.ModelReady(ctx, "echo", "7"); ok || status.Code(err) != codes.NotFound {
		t.Fatal(ok, err)
	}
	sm, err := c.ServerMetadata(ctx)
	if err != nil || sm.Name != "test" || sm.Version != "1.2" {
		t.Fatal(sm, err)
	}
	mm, err := c.ModelMetadata(ctx, "echo", "1")
	if err != nil || mm.Name != "echo" || len(mm.Inputs) != 1 || fmt.Sprint(mm.Inputs[0]) != fmt.Sprint(meta) {
		t.Fatal(mm, err)
	}
	_, err = c.ModelMetadata(ctx, "echo", "7")
	wantStatus(t, err, 5 /* NotFound */, `"7"`)
	_, err = c.ModelMetadata(ctx, "nope", "")
	wantStatus(t, err, 5, `"nope"`)
}

var _ = context.Background

func unsafeBytes(xs []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
}

// A received buffer goes back to its pool only once the Tensor and every
// export of it are released: an export outlives the response, and the
// next responses of that size never land in its memory.
func TestPooledBuffersOutliveRelease(t *testing.T) {
	_, addr := serve(t, Options{}, echoModel("echo", TensorMetadata{Name: "x", Datatype: "UINT8", Shape: []int64{-1}}))
	c := dial(t, addr, ClientOptions{})
	first := newRaw(t, dlpack.Uint8, 2<<20)
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: first}}})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := dlpack.From(resp.Output("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	for range 4 {
		next := newRaw(t, dlpack.Uint8, 2<<20)
		r, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: next}}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Output("x").Bytes(), next.data) {
			t.Fatal("a later response differs")
		}
		r.Close()
	}
	b, _, _ := dlpack.ReadOnlyBytes(kept)
	if !bytes.Equal(b, first.data) {
		t.Fatal("an export's memory was reused while it was held")
	}
	kept.Close()
}

// Output.Release runs once for every output a model returns: after the
// server took the ones asked for, at once for the others and on errors.
func TestOutputRelease(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "INT8", Shape: []int64{-1}}
	y := TensorMetadata{Name: "y", Datatype: "INT8", Shape: []int64{-1}}
	var released atomic.Int32
	fail := false
	m := ModelFunc(ModelMetadata{Name: "m", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x, y}},
		func(_ context.Context, req *Request) ([]Output, error) {
			rel := func() { released.Add(1) }
			outs := []Output{{Name: "x", Tensor: req.Inputs[0], Release: rel}, {Name: "y", Tensor: req.Inputs[0], Release: rel}}
			if fail {
				return outs, fmt.Errorf("the model failed")
			}
			return outs, nil
		})
	_, addr := serve(t, Options{}, m)
	c := dial(t, addr, ClientOptions{})
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Int8, 3)}}
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "m", Inputs: in, Outputs: []RequestedOutput{{Name: "y"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 1 || resp.Outputs[0].Name() != "y" || released.Load() != 2 {
		t.Fatalf("outputs %d, released %d", len(resp.Outputs), released.Load())
	}
	resp.Close()
	fail = true
	if _, err := c.Infer(ctxT(t), &InferRequest{Model: "m", Inputs: in}); err == nil || released.Load() != 4 {
		t.Fatalf("%v, released %d", err, released.Load())
	}
}
