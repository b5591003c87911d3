// Package cprod wraps a downstream C library that produces and consumes
// DLPack tensors. Its C code includes "dlpack.h", a copy of the header of
// github.com/godlpack/dlpack that go generate writes into this directory
// (the module records the command as a tool, so it is vendored too).
package cprod

//go:generate go tool dlpack-header -o .

/*
#include "cprod.h"
*/
import "C"

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Arange returns a rows x cols float64 tensor made by the C library
// (column-major, values 0, 1, 2, ... in row-major order) as the
// unsafe.Pointer that dlpack.Import takes; the caller owns it. nil when
// the library refuses the size.
func Arange(rows, cols int64) unsafe.Pointer {
	return unsafe.Pointer(C.cprod_arange(C.int64_t(rows), C.int64_t(cols)))
}

// Sum hands a tensor exported by package dlpack to the C library, which
// sums it and calls its deleter. This package's C.DLManagedTensorVersioned
// and dlpack.ManagedTensorVersioned have the same layout (the library
// checks its mirror against the header), so the conversion goes through
// unsafe.Pointer.
func Sum(m *dlpack.ManagedTensorVersioned) float64 {
	return float64(C.cprod_sum((*C.DLManagedTensorVersioned)(unsafe.Pointer(m))))
}

// SumPointer is Sum for a DLManagedTensorVersioned from any other cgo
// package, passed as unsafe.Pointer(theirPtr).
func SumPointer(p unsafe.Pointer) float64 {
	return float64(C.cprod_sum((*C.DLManagedTensorVersioned)(p)))
}

// Live returns how many tensors made by Arange are not yet freed.
func Live() int64 { return int64(C.cprod_live()) }
