// Package theirs wraps a C library that ships its own dlpack.h
// (theirs_dlpack.h), as projects built on PyTorch or TVM do. Its
// C.DLManagedTensorVersioned is a Go type of its own, distinct from
// package dlpack's ManagedTensorVersioned and from every other cgo
// package's C.DLManagedTensorVersioned; the layouts are the DLPack ABI, so
// pointers convert through unsafe.Pointer in both directions:
//
//	dlpack.Import(unsafe.Pointer(cptr))                   // theirs -> Go
//	(*C.DLManagedTensorVersioned)(unsafe.Pointer(m))      // Go export -> theirs
//
// The functions below pass unsafe.Pointer, the one pointer type every
// package shares.
package theirs

/*
#include "theirs.h"
*/
import "C"

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Fill returns a read-only float32 tensor of n copies of x, made by the C
// library; the caller owns it (dlpack.Import, or another library's
// consumer). nil when the library refuses n.
func Fill(n int64, x float32) unsafe.Pointer {
	return unsafe.Pointer(C.theirs_fill(C.int64_t(n), C.float(x)))
}

// Negate takes ownership of the 1-D float32 tensor at p (any package's
// DLManagedTensorVersioned), releases it, and returns a new tensor made by
// the C library holding the negated elements; nil if the library could not
// read it.
func Negate(p unsafe.Pointer) unsafe.Pointer {
	return unsafe.Pointer(C.theirs_negate((*C.DLManagedTensorVersioned)(p)))
}

// NegateExport is Negate for a tensor exported by package dlpack: the
// conversion from the library's type to this package's C type.
func NegateExport(m *dlpack.ManagedTensorVersioned) unsafe.Pointer {
	out := C.theirs_negate((*C.DLManagedTensorVersioned)(unsafe.Pointer(m)))
	return unsafe.Pointer(out)
}

// Live returns how many tensors made by the C library are not yet freed.
func Live() int64 { return int64(C.theirs_live()) }
