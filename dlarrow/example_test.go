//go:build cgo

package dlarrow_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

// An Arrow column handed to a DLPack consumer without a copy, and a
// tensor made an Arrow array again, sharing the same buffer. Here the
// consumer is Go (dlpack.From); dlpack.Produce(t, req) lends the same
// Tensor to C, Rust or Python.
func ExampleFromArray() {
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	b.AppendValues([]float64{0.5, 1.5, 2.5, 3.5}, nil)
	col := b.NewArray()
	b.Release()

	sl := array.NewSlice(col, 1, 4)
	col.Release()
	t, err := dlarrow.FromArray(sl) // retains sl
	sl.Release()
	if err != nil {
		panic(err)
	}
	f, err := dlpack.From(t) // holds its own reference to the array
	t.Close()
	if err != nil {
		panic(err)
	}
	xs, _ := dlpack.ReadOnlySlice[float64](f)
	fmt.Println(f.Shape(), xs, "writable:", f.Writable())

	back, err := dlarrow.ToArray(f) // back owns f now
	if err != nil {
		panic(err)
	}
	fmt.Println(back)
	back.Release() // the last reference: f is closed, the buffer freed
	// Output:
	// [3] [1.5 2.5 3.5] writable: false
	// [1.5 2.5 3.5]
}
