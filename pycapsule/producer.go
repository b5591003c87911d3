//go:build cgo

package pycapsule

/*
#include "pycapsule.h"
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// ArgError reports an argument of __dlpack__ that cannot be read. It
// wraps ErrArgument; Raise turns it into a TypeError when Type is set (the
// argument has the wrong Python type) and a ValueError otherwise.
type ArgError struct {
	Arg   string // "stream", "max_version", "dl_device" or "copy"
	Value string // repr of the argument
	Type  bool   // wrong type (TypeError) rather than wrong value (ValueError)
	Why   string
}

// Error names the argument, its value and what was expected.
func (e *ArgError) Error() string {
	return fmt.Sprintf("%v: %s = %s (%s)", ErrArgument, e.Arg, e.Value, e.Why)
}

// Unwrap returns ErrArgument.
func (e *ArgError) Unwrap() error { return ErrArgument }

func argErr(arg string, obj uintptr, typ bool, why string) error {
	return &ArgError{Arg: arg, Value: repr(obj), Type: typ, Why: why}
}

// ParseRequest reads the four arguments of the array API's
// __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)
// (borrowed references; a 0 argument is read as None) into a
// dlpack.Request, for a producer whose own device is dev:
//
//   - max_version: None is a legacy request (the zero Version); a tuple
//     (major, minor) of non-negative ints is the consumer's highest
//     version (a major above 1 means a newer consumer, which reads 1.x;
//     a major of 0 is a legacy request).
//   - stream: None is no stream; an int is the consumer's stream, passed
//     to the producer, except -1 for a CPU producer (PyTorch's "no
//     synchronisation", which on the CPU means no stream).
//   - dl_device: None is the producer's own device; a tuple (type, id) of
//     ints is the device the consumer wants.
//   - copy: None is dlpack.CopyIfNeeded; otherwise its truth value gives
//     CopyAlways (True) or CopyNever (False).
//
// Writable is never set: the Python protocol has no way to ask for it.
// Arguments of the wrong type are an *ArgError with Type set, values out
// of range an *ArgError without; no Python exception is left pending.
func ParseRequest(dev dlpack.Device, stream, maxVersion, dlDevice, copy uintptr) (dlpack.Request, error) {
	var req dlpack.Request
	if !isNone(maxVersion) {
		var major, minor C.longlong
		switch C.pycapsule_int_pair(C.uintptr_t(maxVersion), &major, &minor) {
		case -1:
			return req, argErr("max_version", maxVersion, true, "must be None or a tuple (major, minor)")
		case -2:
			return req, argErr("max_version", maxVersion, true, "major and minor must be ints")
		}
		if major < 0 || minor < 0 {
			return req, argErr("max_version", maxVersion, false, "major and minor must not be negative")
		}
		req.MaxVersion = dlpack.Version{Major: clampU32(major), Minor: clampU32(minor)}
		if req.MaxVersion.Major == 0 {
			req.MaxVersion = dlpack.Version{}
		}
	}
	if !isNone(stream) {
		var s C.longlong
		if C.pycapsule_int(C.uintptr_t(stream), &s) != 0 {
			return req, argErr("stream", stream, true, "must be None or an int")
		}
		cpu := dev.Type == dlpack.CPU || dev == dlpack.Device{}
		if !(s == -1 && cpu) {
			req.Stream, req.HasStream = int64(s), true
		}
	}
	if !isNone(dlDevice) {
		var typ, id C.longlong
		switch C.pycapsule_int_pair(C.uintptr_t(dlDevice), &typ, &id) {
		case -1:
			return req, argErr("dl_device", dlDevice, true, "must be None or a tuple (device_type, device_id)")
		case -2:
			return req, argErr("dl_device", dlDevice, true, "device_type and device_id must be ints")
		}
		if typ < 1 || typ > math.MaxInt32 || id < 0 || id > math.MaxInt32 {
			return req, argErr("dl_device", dlDevice, false, "device_type must be in [1, 2^31) and device_id in [0, 2^31)")
		}
		req.Device = dlpack.Device{Type: dlpack.DeviceType(typ), ID: int32(id)}
	}
	if !isNone(copy) {
		switch C.pycapsule_truth(C.uintptr_t(copy)) {
		case 1:
			req.Copy = dlpack.CopyAlways
		case 0:
			req.Copy = dlpack.CopyNever
		default:
			return req, argErr("copy", copy, true, "must be None, True or False")
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
		m.Release() // Python set the error; the tensor was still ours
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
// A Python type for Go tensors implements the protocol in two lines:
//
//	//export mytensor_dlpack
//	func mytensor_dlpack(id C.int64_t, stream, maxVersion, dlDevice, copy C.uintptr_t) C.uintptr_t {
//		return C.uintptr_t(pycapsule.DLPack(lookup(id), uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copy)))
//	}
func DLPack(p dlpack.Producer, stream, maxVersion, dlDevice, copy uintptr) uintptr {
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
		m.Release() // a producer should return none with an error; if it did, it is ours
		Raise(err)
		return 0
	}
	return Capsule(m)
}

// DLPackDevice is the whole of __dlpack_device__: a new reference to the
// tuple (device_type, device_id) of p's device (the zero Device reads as
// the CPU), or 0 with an exception set.
func DLPackDevice(p dlpack.Producer) uintptr {
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
