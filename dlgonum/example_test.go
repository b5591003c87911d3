//go:build cgo

package dlgonum_test

import (
	"fmt"
	"runtime"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgonum"
	"gonum.org/v1/gonum/mat"
)

// Lend a gonum matrix to a DLPack consumer and take one back, sharing
// memory both ways. Here the consumer is Go; with C it would be the
// pointer handed to a C function.
func ExampleToDense() {
	a := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	m, err := dlpack.Produce(dlgonum.FromDense(a), dlpack.Request{})
	if err != nil {
		panic(err)
	}
	f, err := dlpack.Import(m.Pointer())
	if err != nil {
		panic(err)
	}
	b, err := dlgonum.ToDense(f) // b now owns f
	if err != nil {
		panic(err)
	}
	var c mat.Dense
	c.Mul(b, a.T())
	fmt.Println(mat.Formatted(&c))
	runtime.KeepAlive(b)
	// Output:
	// ⎡14  32⎤
	// ⎣32  77⎦
}

// A gonum matrix through the producer protocol: a view keeps its row
// stride, and the consumer shares the matrix's memory.
func ExampleFromDense() {
	a := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	view := a.Slice(1, 3, 0, 2).(*mat.Dense)
	f, err := dlpack.From(dlgonum.FromDense(view)) // Go to Go; dlpack.Produce for C
	if err != nil {
		panic(err)
	}
	defer f.Close()
	v, err := dlpack.ViewOf[float64](f)
	if err != nil {
		panic(err)
	}
	_ = v.Set(-6, 0, 1) // writes a
	fmt.Println(f.Shape(), f.Strides(), a.At(1, 1))
	// Output:
	// [2 2] [4 1] -6
}
