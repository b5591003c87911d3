//go:build cgo

package dlgonum_test

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgonum"
	"gonum.org/v1/gonum/mat"
)

// Lend a gonum matrix to a DLPack consumer and take one back, sharing
// memory both ways. Here the consumer is Go; with C it would be the
// pointer handed to a C function.
func ExampleDense() {
	a := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	m, err := dlgonum.ExportDense(a)
	if err != nil {
		panic(err)
	}
	f, err := dlpack.Import(unsafe.Pointer(m))
	if err != nil {
		panic(err)
	}
	b, err := dlgonum.Dense(f) // b now owns f
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
