//go:build cgo

// Package pycapsule moves DLPack tensors in and out of Python, for Go code
// built as a C shared library (go build -buildmode=c-shared) and loaded
// into a Python process, for example with ctypes. It follows the DLPack
// Python specification: capsules are named "dltensor_versioned" or
// "dltensor", a consumer renames them "used_dltensor_versioned" or
// "used_dltensor", and the destructor of a capsule nobody consumed releases
// its tensor. That destructor is written in C: no Python code runs in it,
// and a pending exception survives it.
//
// Two helpers give a Go extension the whole Python protocol:
//
//   - Producer side: DLPack answers __dlpack__(stream, max_version,
//     dl_device, copy) for any dlpack.Producer, with the array API's rules
//     (ParseRequest, then the producer, then Capsule), and DLPackDevice
//     answers __dlpack_device__.
//   - Consumer side: Import (and Borrow) take any Python object with
//     __dlpack__ (or a capsule) into a dlpack.Foreign; Wrap makes a Python
//     object a dlpack.Producer that passes every request on to it.
//
// The DLPack 1.3 C exchange API (exchange.go) skips __dlpack__: Publish
// gives a Python type a table of C functions (__dlpack_c_exchange_api__)
// that consumers such as tvm-ffi call instead, and Import and Borrow use
// the table of any type that publishes one.
//
// The CPython functions are found at run time in the process (dlsym), so
// building needs no Python headers and the library loads into any CPython
// 3. Init reports whether they were found; every other function must be
// called with the GIL held (as ctypes.PyDLL does) after a successful Init.
// Python objects are passed as uintptr values of their PyObject* address;
// arguments are borrowed references, results new references.
//
// Errors follow one convention: a function returning a Python object
// returns 0 with a Python exception set; a function returning a Go error
// leaves no exception pending, except when the error wraps ErrPython (the
// exception Python raised is still set, for the caller to return to
// Python as it is, or to clear with ClearError). Raise turns any error
// into the Python exception the array API expects.
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
	// ErrArgument: an argument of __dlpack__ is of the wrong type or value
	// (the error is an *ArgError naming it).
	ErrArgument = errors.New("pycapsule: invalid __dlpack__ argument")
	// ErrNoDLPack: the object has no __dlpack__ method and is not a capsule.
	ErrNoDLPack = errors.New("pycapsule: object does not support the DLPack protocol (no __dlpack__)")
	// ErrPython: Python raised an exception, which is still pending; the
	// error's message repeats its type and text.
	ErrPython = errors.New("pycapsule: Python raised")
	// ErrNoGIL: an entry point was called on a thread that does not hold
	// the GIL, as from a library loaded with ctypes.CDLL (which releases
	// it around every call); load it with ctypes.PyDLL. Raise makes it a
	// RuntimeError; an entry point that returns an object returns None
	// with it set, which CPython raises as the cause of a SystemError.
	ErrNoGIL = errors.New("pycapsule: called without the GIL held (load the library with ctypes.PyDLL, not ctypes.CDLL)")
)

// noGIL is what an entry point that returns an object answers without the
// GIL: None with the RuntimeError of ErrNoGIL pending (see
// pycapsule_no_gil).
func noGIL() uintptr {
	cs := C.CString(ErrNoGIL.Error())
	defer C.free(unsafe.Pointer(cs))
	return uintptr(C.pycapsule_no_gil(cs))
}

// checkGIL returns ErrNoGIL when the calling thread does not hold the GIL,
// and ErrNoPython before Init.
func checkGIL() error {
	switch C.pycapsule_gil_held() {
	case 1:
		return nil
	case 0:
		return ErrNoGIL
	}
	return ErrNoPython
}

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
// returns 0 with a Python exception set on failure, and the caller still
// owns the tensor (Capsule releases it instead).
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
// versioned says). On error the capsule still owns its tensor and no
// exception is pending.
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
	kind := C.PYCAPSULE_VALUE_ERROR
	if bufferError {
		kind = C.PYCAPSULE_BUFFER_ERROR
	}
	setError(kind, msg)
}

func setError(kind int, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.pycapsule_set_error(C.int(kind), cs)
}

// Raise sets the Python exception that the array API expects for err, for
// a function about to return failure to Python: none if err wraps
// ErrPython (Python's own exception is already pending), an *ArgError's
// Exception, ValueError for a capsule that cannot be consumed
// (ErrNotCapsule, ErrRename), TypeError for an object without __dlpack__
// (ErrNoDLPack), RuntimeError for a call without the GIL (ErrNoGIL, set
// after taking the GIL), and BufferError for everything else: what a producer
// cannot give or a consumer cannot take.
func Raise(err error) {
	var ae *ArgError
	switch {
	case err == nil:
		return
	case errors.Is(err, ErrPython) && C.pycapsule_error_pending() != 0:
		return
	case errors.As(err, &ae):
		setError(int(ae.Exception), err.Error())
	case errors.Is(err, ErrNotCapsule), errors.Is(err, ErrRename):
		setError(C.PYCAPSULE_VALUE_ERROR, err.Error())
	case errors.Is(err, ErrNoDLPack):
		setError(C.PYCAPSULE_TYPE_ERROR, err.Error())
	case errors.Is(err, ErrNoGIL):
		setError(C.PYCAPSULE_RUNTIME_ERROR, err.Error())
	case errors.Is(err, ErrNoPython):
		return // no Python to tell
	default:
		setError(C.PYCAPSULE_BUFFER_ERROR, err.Error())
	}
}

// ClearError drops the pending Python exception, if any (for Go code that
// handles an ErrPython error itself instead of returning it to Python).
func ClearError() { C.pycapsule_clear_error() }

// pythonError returns an error wrapping ErrPython with the text of the
// pending exception, which stays pending.
func pythonError(what string) error {
	var buf [512]C.char
	C.pycapsule_error_text(&buf[0], C.size_t(len(buf)))
	return &pyError{what: what, text: C.GoString(&buf[0])}
}

type pyError struct{ what, text string }

func (e *pyError) Error() string { return ErrPython.Error() + " in " + e.what + ": " + e.text }
func (e *pyError) Unwrap() error { return ErrPython }

// repr returns repr(obj), shortened, for error messages.
func repr(obj uintptr) string {
	var buf [128]C.char
	C.pycapsule_repr(C.uintptr_t(obj), &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}
