// Command clib calls a C library function that takes a DLPack tensor and
// returns another (scale.c), from Go, without copying on the way in:
//
//	go run ./examples/clib
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "scale.h"
*/
import "C"

import (
	"fmt"
	"log"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// scale hands a tensor to the C library, which takes ownership of it, and
// imports the tensor the library returns.
func scale(m *dlpack.ManagedTensorVersioned, factor float64) (dlpack.Foreign, error) {
	out := C.scale_tensor((*C.DLManagedTensorVersioned)(unsafe.Pointer(m)), C.double(factor))
	if out == nil {
		return dlpack.Foreign{}, fmt.Errorf("scale_tensor refused the tensor")
	}
	return dlpack.Import(unsafe.Pointer(out), dlpack.RequireDataType(dlpack.Float64))
}

func main() {
	// A 2x3 matrix, passed to C as its transpose (3x2, strides 1, 3): the
	// library reads the Go memory in place.
	xs := []float64{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{3, 2}, dlpack.WithStrides(1, 3))
	if err != nil {
		log.Fatal(err)
	}
	f, err := scale(m, 10)
	if err != nil {
		log.Fatal(err)
	}
	ys, err := dlpack.Slice[float64](f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("C returned %v, copied by the library: %v\n", f, f.IsCopied())
	fmt.Println("values:", ys)
	fmt.Println("C tensors outstanding before Close:", int(C.scale_outstanding()))
	f.Close()
	fmt.Println("C tensors outstanding after Close:", int(C.scale_outstanding()))

	// The library refuses what it cannot handle, and still releases it.
	m32, _ := dlpack.Export([]float32{1}, []int64{1})
	if _, err := scale(m32, 2); err != nil {
		fmt.Println("float32 input:", err)
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
