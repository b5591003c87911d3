//go:build cgo

package dlgomlx_test

import (
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// A producer's tensor into GoMLX (one copy, into a simplego buffer), a
// graph run on it, and the result out again without a copy.
func Example() {
	backend, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	defer backend.Finalize()

	x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{2, 2}), backend)
	if err != nil {
		panic(err)
	}
	double, err := graph.NewExec(backend, func(x *graph.Node) *graph.Node { return graph.MulScalar(x, 2) })
	if err != nil {
		panic(err)
	}
	y := double.MustExec1(x)

	e, err := dlgomlx.FromTensor(y) // shares y's buffer, read-only
	if err != nil {
		panic(err)
	}
	f, err := dlpack.From(e) // any consumer: NumPy, JAX, C...
	if err != nil {
		panic(err)
	}
	v, _ := dlpack.ReadOnlySlice[float32](f)
	fmt.Println(f.Shape(), v, "copied:", e.Copied())

	_ = dlgomlx.FinalizeAll(y) // waits for f
	f.Close()                  // y is finalized now
	x.MustFinalizeAll()
	fmt.Println("y valid:", y.Ok(), "outstanding:", dlpack.Outstanding())
	// Output:
	// [2 2] [2 4 6 8] copied: false
	// y valid: false outstanding: 0
}

// A GoMLX tensor handed out with a copy the consumer may write.
func ExampleCopyFromTensor() {
	t := tensors.FromValue([][]int32{{1, 2}, {3, 4}})
	e, err := dlgomlx.CopyFromTensor(t)
	if err != nil {
		panic(err)
	}
	t.MustFinalizeAll() // the copy owes nothing to t
	m, err := e.DLPack(dlpack.Request{})
	if err != nil {
		panic(err)
	}
	f, err := m.Import()
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Println(f.Shape(), f.Flags())
	// Output:
	// [2 2] IS_COPIED
}
