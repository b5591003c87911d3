//go:build cgo

package pycapsule

/*
#include "pycapsule.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// Exception is a Python exception type: the one Raise sets for an error.
type Exception int

// The exceptions Raise sets. The zero Exception is ValueError.
const (
	ValueError Exception = iota
	BufferError
	TypeError
	OverflowError
	RuntimeError
)

var exceptionNames = [...]string{"ValueError", "BufferError", "TypeError", "OverflowError", "RuntimeError"}

// String returns the exception's Python name.
func (e Exception) String() string {
	if e >= 0 && int(e) < len(exceptionNames) {
		return exceptionNames[e]
	}
	return fmt.Sprintf("Exception(%d)", int(e))
}

// ArgError reports an argument of __dlpack__ that the array API does not
// accept. It wraps ErrArgument; Raise turns it into its Exception (the
// zero value, ValueError, for a value out of range).
type ArgError struct {
	Arg       string    // "stream", "max_version", "dl_device" or "copy"
	Value     string    // repr of the argument
	Exception Exception // what Raise sets: the type NumPy raises for the same argument
	Why       string
}

// Error names the argument, its value and what was expected.
func (e *ArgError) Error() string {
	return fmt.Sprintf("%v: %s = %s (%s)", ErrArgument, e.Arg, e.Value, e.Why)
}

// Unwrap returns ErrArgument.
func (e *ArgError) Unwrap() error { return ErrArgument }

func argErr(arg string, obj uintptr, exc Exception, why string) error {
	return &ArgError{Arg: arg, Value: repr(obj), Exception: exc, Why: why}
}

// ParseRequest reads the four arguments of the array API's
// __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)
// (borrowed references; a 0 argument is read as None) into a
// dlpack.Request, for a producer whose own device is dev. It accepts what
// the array API names and nothing else; where NumPy's own __dlpack__
// refuses an argument too, the refusal is the same exception type (NumPy
// accepts more: any copy but a string, any minor version):
//
//   - max_version: None is a legacy request (Legacy set: the zero
//     dlpack.Request is a versioned one); otherwise
//     a tuple (major, minor) of ints (TypeError for anything else,
//     OverflowError beyond 64 bits), the consumer's highest version. A
//     major above 1 means a newer consumer, which reads 1.x; a major
//     below 1 is a legacy request, and a negative minor reads as 0.
//   - stream: None is no stream. A producer on the CPU (or the zero
//     Device) takes no other value, not even -1 (RuntimeError, as NumPy,
//     pyarrow and JAX raise: the array API accepts only None on devices
//     without streams). On another device the stream is an int (TypeError,
//     OverflowError beyond 64 bits) of at least -1 ("no synchronisation"),
//     and neither 0 on CUDA nor 1 or 2 on ROCm, values the array API
//     disallows (ValueError); it is passed to the producer.
//   - dl_device: None is the producer's own device; otherwise a tuple
//     (device_type, device_id) of ints (TypeError for anything else,
//     OverflowError beyond 32 bits), the device the consumer wants. A
//     device type below 1 or a negative id is no device at all:
//     BufferError, the array API's refusal of a device the producer
//     cannot handle (as for any device other than its own, which the
//     producer refuses).
//   - copy: None is dlpack.CopyIfNeeded, True CopyAlways, False
//     CopyNever; anything else, even a value with a truth value such as
//     1 or numpy.True_, is a ValueError (NumPy raises ValueError for the
//     strings it refuses).
//
// Writable is never set: the Python protocol has no way to ask for it.
// A refused argument is an *ArgError naming it, with the exception Raise
// sets; no Python exception is left pending.
func ParseRequest(dev dlpack.Device, stream, maxVersion, dlDevice, copy uintptr) (dlpack.Request, error) {
	req := dlpack.Request{Legacy: true} // max_version=None
	if !isNone(maxVersion) {
		var major, minor C.longlong
		switch C.pycapsule_int_pair(C.uintptr_t(maxVersion), &major, &minor) {
		case -1:
			return req, argErr("max_version", maxVersion, TypeError, "must be None or a tuple (major, minor)")
		case -2:
			return req, argErr("max_version", maxVersion, TypeError, "major and minor must be ints")
		case -3:
			return req, argErr("max_version", maxVersion, OverflowError, "major and minor must fit 64 bits")
		}
		if major >= 1 {
			req.MaxVersion = dlpack.Version{Major: clampU32(major), Minor: clampU32(max(minor, 0))}
			req.Legacy = false
		}
	}
	if !isNone(stream) {
		if dev.Type == dlpack.CPU || dev == (dlpack.Device{}) {
			return req, argErr("stream", stream, RuntimeError, "a CPU tensor takes only stream=None")
		}
		var s C.longlong
		switch C.pycapsule_int(C.uintptr_t(stream), &s) {
		case -1:
			return req, argErr("stream", stream, TypeError, "must be None or an int")
		case -2:
			return req, argErr("stream", stream, OverflowError, "must fit 64 bits")
		}
		switch {
		case s < -1:
			return req, argErr("stream", stream, ValueError, "must be at least -1")
		case s == 0 && dev.Type == dlpack.CUDA:
			return req, argErr("stream", stream, ValueError, "0 is ambiguous on CUDA: use 1 for the legacy default stream, 2 for the per-thread one")
		case (s == 1 || s == 2) && dev.Type == dlpack.ROCM:
			return req, argErr("stream", stream, ValueError, "1 and 2 are not ROCm streams: use 0 for the default stream")
		}
		req.Stream, req.HasStream = int64(s), true
	}
	if !isNone(dlDevice) {
		var typ, id C.longlong
		r := C.pycapsule_int_pair(C.uintptr_t(dlDevice), &typ, &id)
		switch {
		case r == -1:
			return req, argErr("dl_device", dlDevice, TypeError, "must be None or a tuple (device_type, device_id)")
		case r == -2:
			return req, argErr("dl_device", dlDevice, TypeError, "device_type and device_id must be ints")
		case r == -3, typ < math.MinInt32, typ > math.MaxInt32, id < math.MinInt32, id > math.MaxInt32:
			return req, argErr("dl_device", dlDevice, OverflowError, "device_type and device_id must fit 32 bits")
		}
		if typ < 1 || id < 0 {
			return req, argErr("dl_device", dlDevice, BufferError, "no such device: device_type must be at least 1 and device_id at least 0")
		}
		req.Device = dlpack.Device{Type: dlpack.DeviceType(typ), ID: int32(id)}
	}
	if !isNone(copy) {
		switch C.pycapsule_bool(C.uintptr_t(copy)) {
		case 1:
			req.Copy = dlpack.CopyAlways
		case 0:
			req.Copy = dlpack.CopyNever
		default:
			return req, argErr("copy", copy, ValueError, "must be True, False or None")
		}
	}
	return req, nil
}

func isNone(obj uintptr) bool { return obj == 0 || C.pycapsule_is_none(C.uintptr_t(obj)) != 0 }

func clampU32(x C.longlong) uint32 {
	if x > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(x)
}

// Capsule wraps the managed tensor a producer handed over in a new capsule
// ("dltensor_versioned" or "dltensor", as its kind says) and returns the
// new reference, which owns the tensor until a consumer renames it. On
// failure it releases the tensor and returns 0 with a Python exception set
// (BufferError for the zero Managed).
func Capsule(m dlpack.Managed) uintptr {
	p := m.Pointer()
	if p == nil {
		setError(C.PYCAPSULE_BUFFER_ERROR, "pycapsule: the producer returned no tensor")
		return 0
	}
	c := New(p, m.Versioned != nil)
	if c == 0 {
		m.Close() // Python set the error; the tensor was still ours
	}
	return c
}

// DLPack is the whole of __dlpack__ for a Go producer: it reads the four
// arguments (borrowed references, None or 0 for absent) with ParseRequest,
// asks p for the tensor, and returns the new reference of its capsule.
// On failure it returns 0 with the exception the array API expects set
// (Raise): TypeError or ValueError for a bad argument, BufferError for a
// request the producer cannot honour (stream on the CPU, another device,
// copy=False when a copy is needed, ...). What the versions, copies and
// flags are is p's decision: for a dlpack.Source, dlpack.Produce's. A nil
// p (nil, or a nil pointer such as a nil *dlpack.Array) is a BufferError
// (dlpack.ErrNilPointer), and a tensor that p's DLPack returned together
// with an error is released: the same answers as dlpack.From.
//
// Called without the GIL (a library loaded with ctypes.CDLL), it touches
// nothing and returns None with a RuntimeError (ErrNoGIL) pending, which
// CPython raises as the cause of a SystemError (a NULL result would crash
// ctypes.CDLL).
//
// A Python type for Go tensors implements the protocol in two lines:
//
//	//export mytensor_dlpack
//	func mytensor_dlpack(id C.int64_t, stream, maxVersion, dlDevice, copy C.uintptr_t) C.uintptr_t {
//		return C.uintptr_t(pycapsule.DLPack(lookup(id), uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copy)))
//	}
func DLPack(p dlpack.Producer, stream, maxVersion, dlDevice, copy uintptr) uintptr {
	switch err := checkGIL(); {
	case errors.Is(err, ErrNoGIL):
		return noGIL()
	case err != nil:
		return 0
	}
	if nilcheck.IsNil(p) {
		Raise(noProducer(p))
		return 0
	}
	req, err := ParseRequest(p.DLPackDevice(), stream, maxVersion, dlDevice, copy)
	if err != nil {
		Raise(err)
		return 0
	}
	m, err := p.DLPack(req)
	if err == nil && m.Pointer() == nil {
		err = &dlpack.FieldError{Field: "managed tensor", Value: "NULL", Err: dlpack.ErrNilPointer, Why: "the producer returned no tensor and no error"}
	}
	if err != nil {
		m.Close() // a producer should return none with an error; if it did, it is ours
		Raise(err)
		return 0
	}
	return Capsule(m)
}

// DLPackDevice is the whole of __dlpack_device__: a new reference to the
// tuple (device_type, device_id) of p's device (the zero Device reads as
// the CPU), or 0 with an exception set.
func DLPackDevice(p dlpack.Producer) uintptr {
	switch err := checkGIL(); {
	case errors.Is(err, ErrNoGIL):
		return noGIL()
	case err != nil:
		return 0
	}
	if nilcheck.IsNil(p) {
		Raise(noProducer(p))
		return 0
	}
	d := p.DLPackDevice()
	if d == (dlpack.Device{}) {
		d = dlpack.CPUDevice
	}
	return uintptr(C.pycapsule_pair(C.longlong(d.Type), C.longlong(d.ID)))
}

// noProducer is the error for a nil producer (nil, or a nil pointer whose
// methods would panic): the one dlpack.From gives, which refuses a nil
// producer before calling any of its methods.
func noProducer(p dlpack.Producer) error {
	_, err := dlpack.From(p)
	return err
}
