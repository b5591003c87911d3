//go:build cgo

package dlgomlx_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// A local tensor may be finalized, donated or run while exported: GoMLX
// drops or copies its flat slice but never writes it again, and the
// consumer keeps reading the same values.
func TestLocalTensorSurvivesFinalizeAndDonation(t *testing.T) {
	b := newBackend(t)
	addOne, err := graph.NewExec(b, func(x *graph.Node) *graph.Node { return graph.AddScalar(x, 1) })
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 2, 3, 4}

	// Donated to an execution that may write its result in place.
	x := tensors.FromFlatDataAndDimensions(slices.Clone(want), 4)
	f, e := export(t, x)
	donated, err := graph.DonateTensorBuffer(x, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	y, err := addOne.Exec1(donated)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, f); !slices.Equal(got, want) {
		t.Fatalf("after donation the consumer reads %v", got)
	}
	if !x.Ok() {
		t.Fatal("donation invalidated the local tensor")
	}
	y.MustFinalizeAll()

	// Finalized, then its memory's worth of new tensors made.
	x.MustFinalizeAll()
	for range 10 {
		z, err := addOne.Exec1(tensors.FromFlatDataAndDimensions([]float32{9, 9, 9, 9}, 4))
		if err != nil {
			t.Fatal(err)
		}
		z.MustFinalizeAll()
	}
	if got := read(t, f); !slices.Equal(got, want) {
		t.Fatalf("after FinalizeAll the consumer reads %v", got)
	}
	// No new export of a finalized tensor.
	if _, err := dlpack.From(e); err == nil {
		t.Fatal("exported a finalized tensor")
	}
	f.Close()
}

// What happens to a tensor in a simplego buffer when GoMLX gives the
// buffer back while a consumer reads it: t.FinalizeAll returns it to
// simplego's pool and a later execution writes its result there, under
// the consumer; donating it makes the execution write in place. This
// package's FinalizeAll waits for the consumer instead.
func TestBufferTensorReuseAndDeferredFinalize(t *testing.T) {
	b := newBackend(t)
	addOne, err := graph.NewExec(b, func(x *graph.Node) *graph.Node { return graph.AddScalar(x, 1) })
	if err != nil {
		t.Fatal(err)
	}
	// run executes addOne on a new input and finalizes the input; it
	// returns the result and where the input was.
	run := func(v float32) (*tensors.Tensor, uintptr) {
		x := tensors.FromFlatDataAndDimensions([]float32{v, v, v, v}, 4)
		y, err := addOne.Exec1(x)
		if err != nil {
			t.Fatal(err)
		}
		in := addrOf(t, x) // now in a simplego buffer
		x.MustFinalizeAll()
		return y, in
	}
	fill := func(v float32) []float32 { return []float32{v, v, v, v} }

	// GoMLX's FinalizeAll: the memory is reused by a later execution.
	// sync.Pool decides when (and under -race drops some buffers), so the
	// scenario is retried until reuse is seen.
	reused := ""
	for attempt := 0; attempt < 50 && reused == ""; attempt++ {
		y, _ := run(1)
		f, _ := export(t, y)
		at := f.DataAddr()
		y.MustFinalizeAll()
		for i := range 20 {
			v := float32(10 + i)
			z, in := run(v)
			switch at {
			case in:
				reused = "an input"
				if got := read(t, f); !slices.Equal(got, fill(v)) {
					t.Fatalf("reused memory reads %v, want the input %v", got, v)
				}
			case addrOf(t, z):
				reused = "a result"
				if got := read(t, f); !slices.Equal(got, fill(v+1)) {
					t.Fatalf("reused memory reads %v, want the result %v", got, v+1)
				}
			}
			z.MustFinalizeAll()
			if reused != "" {
				t.Logf("GoMLX's FinalizeAll: attempt %d, execution %d put %s in the memory the consumer reads", attempt+1, i+1, reused)
				break
			}
		}
		f.Close()
	}
	if reused == "" {
		t.Fatal("simplego never reused a finalized buffer")
	}

	// Donation: the execution writes its result in place.
	y, _ := run(1)
	f, _ := export(t, y)
	donated, err := graph.DonateTensorBuffer(y, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	z, err := addOne.Exec1(donated)
	if err != nil {
		t.Fatal(err)
	}
	if addrOf(t, z) == f.DataAddr() {
		if got := read(t, f); !slices.Equal(got, []float32{3, 3, 3, 3}) {
			t.Fatalf("in-place result reads %v", got)
		}
		t.Log("donation: the execution wrote its result into the memory the consumer reads")
	} else if got := read(t, f); !slices.Equal(got, []float32{2, 2, 2, 2}) {
		t.Fatalf("consumer reads %v", got)
	}
	z.MustFinalizeAll()
	f.Close()

	// dlgomlx.FinalizeAll: deferred until the consumer is done.
	y, _ = run(1)
	f, e := export(t, y)
	at := f.DataAddr()
	if err := dlgomlx.FinalizeAll(y); err != nil {
		t.Fatal(err)
	}
	if !y.Ok() || dlgomlx.Exports(y) != 1 {
		t.Fatalf("finalized under a consumer (ok %v, exports %d)", y.Ok(), dlgomlx.Exports(y))
	}
	if _, err := dlpack.From(e); !errors.Is(err, dlgomlx.ErrTensor) {
		t.Fatalf("a tensor waiting for finalization exported again: %v", err)
	}
	if _, err := dlgomlx.FromTensor(y); !errors.Is(err, dlgomlx.ErrTensor) {
		t.Fatalf("FromTensor of a tensor waiting for finalization: %v", err)
	}
	for i := range 50 {
		z, in := run(float32(100 + i))
		if addrOf(t, z) == at || in == at {
			t.Fatal("GoMLX reused memory a consumer still reads")
		}
		z.MustFinalizeAll()
	}
	if got := read(t, f); !slices.Equal(got, []float32{2, 2, 2, 2}) {
		t.Fatalf("consumer reads %v", got)
	}
	f.Close()
	if y.Ok() || dlgomlx.Exports(y) != 0 {
		t.Fatalf("not finalized after the last consumer (ok %v, exports %d)", y.Ok(), dlgomlx.Exports(y))
	}
	// With no consumer it finalizes at once.
	y, _ = run(1)
	if err := dlgomlx.FinalizeAll(y); err != nil || y.Ok() {
		t.Fatalf("FinalizeAll without exports: %v, ok %v", err, y.Ok())
	}
}

// export hands x to a Go consumer through the protocol.
func export(t *testing.T, x *tensors.Tensor) (dlpack.Foreign, *dlgomlx.Tensor) {
	t.Helper()
	e, err := dlgomlx.FromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.From(e)
	if err != nil {
		t.Fatal(err)
	}
	return f, e
}

func read(t *testing.T, f dlpack.Foreign) []float32 {
	t.Helper()
	v, err := dlpack.ReadOnlySlice[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(v)
}
