//go:build cgo

// Package pycapsule moves DLPack tensors in and out of Python capsules, for
// Go code built as a C shared library (go build -buildmode=c-shared) and
// loaded into a Python process, for example with ctypes. It follows the
// DLPack Python specification: capsules are named "dltensor_versioned" or
// "dltensor", a consumer renames them "used_dltensor_versioned" or
// "used_dltensor", and the destructor of a capsule nobody consumed releases
// its tensor. That destructor is written in C: no Python code runs in it,
// and a pending exception survives it.
//
// The CPython functions are found at run time in the process (dlsym), so
// building needs no Python headers and the library loads into any CPython
// 3. Init reports whether they were found; every other function must be
// called with the GIL held (as ctypes.PyDLL does) after a successful Init.
// Python objects are passed as uintptr values of their PyObject* address.
package pycapsule

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "pycapsule.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Sentinel errors.
var (
	// ErrNoPython: the CPython C API is not in this process.
	ErrNoPython = errors.New("pycapsule: not running inside a CPython process")
	// ErrNotCapsule: the object is not an unconsumed DLPack capsule (it may
	// have been consumed already).
	ErrNotCapsule = errors.New("pycapsule: not an unconsumed DLPack capsule (a capsule can be consumed only once)")
	// ErrRename: the capsule could not be renamed; it still owns its tensor.
	ErrRename = errors.New("pycapsule: could not mark the capsule consumed")
)

// Init finds the CPython functions this package calls.
func Init() error {
	if C.pycapsule_init() != 0 {
		return ErrNoPython
	}
	return nil
}

// New wraps a managed tensor (a *DLManagedTensorVersioned if versioned,
// else a *DLManagedTensor) in a new capsule and returns its new reference.
// The capsule owns the tensor until a consumer renames it; if it is
// destroyed unconsumed, its destructor calls the tensor's deleter. It
// returns 0 with a Python exception set on failure.
func New(managed unsafe.Pointer, versioned bool) uintptr {
	v := C.int(0)
	if versioned {
		v = 1
	}
	return uintptr(C.pycapsule_new(managed, v))
}

// Consume takes the tensor out of an unconsumed DLPack capsule (borrowed
// reference) and marks the capsule consumed; the caller then owns the
// tensor (import it with dlpack.Import or dlpack.ImportLegacy, as
// versioned says).
func Consume(capsule uintptr) (managed unsafe.Pointer, versioned bool, err error) {
	var v, e C.int
	p := C.pycapsule_consume(C.uintptr_t(capsule), &v, &e)
	switch e {
	case 1:
		return nil, false, ErrNotCapsule
	case 2:
		return nil, false, ErrRename
	}
	return p, v == 1, nil
}

// SetError sets a Python BufferError (bufferError true) or ValueError with
// the message, for a function about to return failure to Python.
func SetError(bufferError bool, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	b := C.int(0)
	if bufferError {
		b = 1
	}
	C.pycapsule_set_error(b, cs)
}
