//go:build cgo

package pycapsule

/*
#include "pycapsule.h"
*/
import "C"

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// ConsumerVersion is the max_version Import and Borrow ask Python
// producers for: the DLPack version this library reads.
var ConsumerVersion = dlpack.CurrentVersion

// Import takes obj (a borrowed reference) into Go as an owned
// dlpack.Foreign, as the array API's from_dlpack does: it calls
// obj.__dlpack__(max_version=(1, 3)), retrying obj.__dlpack__() if that
// raises TypeError (producers that predate max_version), consumes the
// capsule and imports it with dlpack.Import or dlpack.ImportLegacy, as the
// capsule's name says, whatever was asked (opts apply as there; legacy
// tensors are read-only unless dlpack.AssumeWritable is given). obj may
// also be an unconsumed DLPack capsule, which is consumed directly.
//
// When obj's type publishes a usable DLPack 1.3 exchange table
// (__dlpack_c_exchange_api__, see ExchangeAPIOf), the tensor comes
// through its managed_tensor_from_py_object_no_sync instead of
// __dlpack__, versioned and unsynchronised ("no_sync": for device tensors
// the caller orders its work after the producer's current_work_stream);
// an instance of a type this library published (Publish) is taken Go to
// Go with dlpack.From.
//
// The caller owns the Foreign and Closes it; it does not keep obj: the
// capsule's tensor itself keeps the producer's memory alive (for NumPy,
// the array), until its deleter, which Close (or the last user of a
// re-export of the Foreign) calls once, from any thread.
//
// Errors: ErrNoDLPack, ErrNotCapsule (a used capsule, or __dlpack__
// returned something else), ErrPython (__dlpack__ raised; the exception is
// still pending), ErrNoGIL (called without the GIL: nothing was read), or
// the import's error (the tensor was released). No
// stream is passed: for CUDA producers that is the legacy default stream,
// which the producer orders its work before; Wrap passes each consumer's
// own request, stream included.
func Import(obj uintptr, opts ...dlpack.ImportOption) (dlpack.Foreign, error) {
	if err := checkGIL(); err != nil {
		return dlpack.Foreign{}, err
	}
	p, m, err := takeOf(obj)
	if err != nil {
		return dlpack.Foreign{}, err
	}
	if p != nil {
		return dlpack.From(p, opts...)
	}
	return m.Import(opts...)
}

// Borrow is the scoped Import: it lends the tensor to fn and releases it
// when fn returns (or panics), with no cleanup registered; the Foreign and
// its views must not be used after fn returns. fn's error is returned as
// it is.
func Borrow(obj uintptr, fn func(dlpack.Foreign) error, opts ...dlpack.ImportOption) error {
	if err := checkGIL(); err != nil {
		return err
	}
	p, m, err := takeOf(obj)
	if err != nil {
		return err
	}
	if p != nil {
		f, err := dlpack.From(p, opts...)
		if err != nil {
			return err
		}
		defer f.Close()
		return fn(f)
	}
	if m.Versioned != nil {
		return dlpack.Borrow(unsafe.Pointer(m.Versioned), fn, opts...)
	}
	return dlpack.BorrowLegacy(unsafe.Pointer(m.Legacy), fn, opts...)
}

func consumerArgs() C.pycapsule_args {
	return C.pycapsule_args{major: C.longlong(ConsumerVersion.Major), minor: C.longlong(ConsumerVersion.Minor), copy: -1}
}

// managedOf gets a capsule from obj (obj itself, or what its __dlpack__
// returns for a) and takes its tensor.
func managedOf(obj uintptr, a C.pycapsule_args, tryTable bool) (dlpack.Managed, error) {
	if obj == 0 {
		return dlpack.Managed{}, fmt.Errorf("%w: NULL object", ErrNoDLPack)
	}
	var capsule uintptr
	switch C.pycapsule_kind(C.uintptr_t(obj)) {
	case 1:
		capsule = obj
		C.pycapsule_incref(C.uintptr_t(obj))
	case 2:
		return dlpack.Managed{}, ErrNotCapsule
	default:
		// A request the exchange API can express (versioned, no stream,
		// device or copy) goes through the type's table when it has one.
		if tryTable && a.has_stream == 0 && a.has_device == 0 && a.copy < 0 && a.major >= 1 {
			if m, ok, err := managedFromTable(ExchangeAPIOf(obj), obj); ok {
				return m, err
			}
		}
		protocolImports.Add(1)
		var state C.int
		capsule = uintptr(C.pycapsule_call_dlpack(C.uintptr_t(obj), &a, &state))
		switch state {
		case 1:
			return dlpack.Managed{}, fmt.Errorf("%w: %s", ErrNoDLPack, repr(obj))
		case 2:
			return dlpack.Managed{}, pythonError("__dlpack__")
		}
	}
	// Our reference to the capsule goes either way: consumed, it no longer
	// owns the tensor; not consumed, its destructor releases it.
	defer C.pycapsule_decref(C.uintptr_t(capsule))
	p, versioned, err := Consume(capsule)
	if err != nil {
		if capsule != obj {
			return dlpack.Managed{}, fmt.Errorf("%w: __dlpack__ returned %s", err, repr(capsule))
		}
		return dlpack.Managed{}, err
	}
	if versioned {
		return dlpack.Managed{Versioned: (*dlpack.ManagedTensorVersioned)(p)}, nil
	}
	return dlpack.Managed{Legacy: (*dlpack.ManagedTensor)(p)}, nil
}

// Object is a Python object with __dlpack__ seen from Go as a
// dlpack.Producer: each DLPack call is a call of its __dlpack__ with the
// request's arguments (stream, max_version, dl_device, copy), so a Go
// consumer's request, or a Python consumer's passed on through DLPack,
// reaches the producer itself, stream included: the producer orders its
// pending work before that stream, as the array API rules. This is the
// difference from Import: an imported Foreign handed on is synchronised
// only as its one import was (stream None).
//
// Object holds a reference to the Python object until Close. Its methods
// call Python: call them, and Close, with the GIL held, never from a
// goroutine of the Go runtime's own (a cleanup, a finalizer). An Object
// never closed keeps its Python object alive (a reference leak, never a
// crash).
type Object struct {
	obj    atomic.Uintptr
	device dlpack.Device
}

// Wrap makes obj (a borrowed reference) a producer, taking a reference of
// its own. It asks obj.__dlpack_device__() once (a Python object's device
// does not change); an object without one is taken to be on the CPU, as
// NumPy's from_dlpack does. Errors: ErrNoDLPack, ErrPython (the exception
// is pending), or an *ArgError when __dlpack_device__ returns something
// other than a tuple of two ints.
func Wrap(obj uintptr) (*Object, error) {
	if err := checkGIL(); err != nil {
		return nil, err
	}
	if obj == 0 {
		return nil, fmt.Errorf("%w: NULL object", ErrNoDLPack)
	}
	if C.pycapsule_kind(C.uintptr_t(obj)) != 0 {
		return nil, fmt.Errorf("%w: a capsule can be consumed only once; wrap the object that made it", ErrNoDLPack)
	}
	var typ, id C.longlong
	switch C.pycapsule_call_device(C.uintptr_t(obj), &typ, &id) {
	case 1:
		typ, id = C.longlong(dlpack.CPU), 0
	case 2:
		return nil, pythonError("__dlpack_device__")
	case 3:
		return nil, &ArgError{Arg: "__dlpack_device__()", Value: repr(obj), Exception: TypeError, Why: "must return a tuple (device_type, device_id) of ints"}
	}
	if typ < 1 || typ > math.MaxInt32 || id < 0 || id > math.MaxInt32 {
		return nil, &ArgError{Arg: "__dlpack_device__()", Value: fmt.Sprintf("(%d, %d)", typ, id), Why: "device out of range"}
	}
	o := &Object{device: dlpack.Device{Type: dlpack.DeviceType(typ), ID: int32(id)}}
	C.pycapsule_incref(C.uintptr_t(obj))
	o.obj.Store(obj)
	return o, nil
}

// DLPackDevice returns the device the object reported when wrapped.
func (o *Object) DLPackDevice() dlpack.Device { return o.device }

// DLPack calls the object's __dlpack__ with req's arguments: stream if
// req.HasStream, max_version unless req.IsLegacy (the zero MaxVersion
// sends (1, 3), this package's version), dl_device if
// req.Device is not the zero Device, copy unless CopyIfNeeded; a producer
// that rejects max_version with TypeError is asked again without it (when
// neither copy nor dl_device is asked). The tensor is handed over as the
// capsule's name says (versioned or legacy): the caller owns it. A
// req.Writable the Python protocol cannot express is not passed on; the
// consumer checks the tensor's flags (dlpack.RequireWritable does).
// Errors: dlpack.ErrClosed after Close, ErrPython (pending), ErrNotCapsule.
func (o *Object) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if err := checkGIL(); err != nil {
		return dlpack.Managed{}, err
	}
	obj := o.obj.Load()
	if obj == 0 {
		return dlpack.Managed{}, fmt.Errorf("%w: pycapsule.Object used after Close", dlpack.ErrClosed)
	}
	a := C.pycapsule_args{copy: -1}
	if req.HasStream {
		a.has_stream, a.stream = 1, C.longlong(req.Stream)
	}
	if !req.IsLegacy() {
		v := req.MaxVersion
		if v == (dlpack.Version{}) {
			v = dlpack.CurrentVersion
		}
		a.major, a.minor = C.longlong(v.Major), C.longlong(v.Minor)
	}
	if req.Device != (dlpack.Device{}) {
		a.has_device, a.device_type, a.device_id = 1, C.longlong(req.Device.Type), C.longlong(req.Device.ID)
	}
	switch req.Copy {
	case dlpack.CopyNever:
		a.copy = 0
	case dlpack.CopyAlways:
		a.copy = 1
	}
	return managedOf(obj, a, true)
}

// Close drops the reference to the Python object (GIL held). Later DLPack
// calls fail with dlpack.ErrClosed; tensors already handed over are not
// affected (each keeps its producer's memory alive itself). Close is
// idempotent.
func (o *Object) Close() error {
	if obj := o.obj.Swap(0); obj != 0 {
		C.pycapsule_decref(C.uintptr_t(obj))
	}
	return nil
}
