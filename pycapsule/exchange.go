//go:build cgo

package pycapsule

/*
#include <stdlib.h>
#include "exchange.h"
#include "pycapsule.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// ErrExchange is wrapped by the errors of a DLPack exchange table's
// entries that fail and of Publish when a Python type cannot be given a
// table.
var ErrExchange = errors.New("pycapsule: DLPack exchange API")

// TensorType tells the exchange API how to read and make the instances of
// a Python type whose objects hold Go tensors (see Publish). Both
// functions are called with the GIL held, from whatever thread the
// consumer calls the table on, with obj an instance of the type (or of a
// subtype: others are refused before). An error they return becomes the
// Python exception of the failing entry: the one already pending if there
// is one, else a BufferError with the error's text.
type TensorType struct {
	// Producer returns the producer held by obj (a borrowed reference).
	// The table asks it on an object's first exchange only (see Publish);
	// Import and Borrow of the object ask it each time.
	Producer func(obj uintptr) (dlpack.Producer, error)
	// New returns a new reference to a new instance of the type that owns
	// f (an owned import: the instance closes it when done with it). On
	// error New leaves f alone; the caller closes it.
	New func(f dlpack.Foreign) (uintptr, error)
}

// Exchange is the DLPack 1.3 exchange table that Publish made for a Python
// type: C memory for the process lifetime.
type Exchange struct {
	slot int
	typ  uintptr
	t    TensorType
	api  *dlpack.ExchangeAPI
}

var (
	publishMu sync.Mutex
	published [C.EXCHANGE_SLOTS]atomic.Pointer[Exchange]
)

// Publish makes the Python type pyType (a borrowed reference to a class
// whose instances hold Go tensors) a DLPack 1.3 producer in the C
// exchange API: it sets pyType.__dlpack_c_exchange_api__ to a capsule
// named "dlpack_exchange_api" holding a DLPackExchangeAPI* (version 1.3,
// prev_api NULL) that stays valid for the process lifetime, as the DLPack
// Python specification rules. Consumers such as tvm-ffi then exchange
// tensors through C calls instead of __dlpack__. Entries are called with
// the GIL held (the spec's rule; "no_sync": no stream is synchronised) and
// fail by returning -1 with a Python exception set, never by crashing:
//
//   - managed_tensor_from_py_object_no_sync(obj, out) refuses (TypeError)
//     objects that are not instances of pyType or a subtype. The first
//     call for an object asks t.Producer(obj) for the producer and the
//     producer for a versioned tensor with the zero dlpack.Request (for a
//     dlpack.Source, dlpack.Produce's rules: zero-copy, flags kept), and
//     keeps that export in the object's attribute _dlpack_c_export for
//     the object's lifetime. Every call lends a new tensor of that export
//     (a small C block with a pure-C deleter, IS_COPIED cleared as it is
//     shared); the export is released when the object and every lent
//     tensor are gone, in any order, from any thread. So the object shows
//     what its producer held at the first exchange; deleting the attribute
//     makes the next exchange ask the producer again. Instances must take
//     attributes (have a __dict__); else the entry fails with Python's
//     AttributeError.
//   - managed_tensor_to_py_object_no_sync(tensor, out) takes the tensor
//     (ownership is stolen, also on failure, when it is released),
//     imports it as an owned dlpack.Foreign (validated as dlpack.Import
//     does) and returns t.New's new instance.
//   - dltensor_from_py_object_no_sync(obj, out) fills the non-owning
//     DLTensor of the same export: its shape and strides live as long as
//     obj. Read-only tensors are refused (BufferError): a DLTensor carries
//     no flags to say so.
//   - managed_tensor_allocator is the root package's (dlpack.PublishedExchangeAPI).
//   - current_work_stream reports NULL, the default stream, for every
//     device: Go keeps no streams.
//
// The table is a second one, separate from dlpack.PublishedExchangeAPI
// (whose Python-object entries are NULL, for C callers): prev_api chains
// older versions of the protocol, not tables for other uses. Publishing a
// type again returns its table; a library can publish up to 8 types
// (ErrExchange beyond). The type keeps the capsule; the library keeps a
// reference to the type for the process lifetime.
func Publish(pyType uintptr, t TensorType) (*Exchange, error) {
	if t.Producer == nil || t.New == nil {
		return nil, fmt.Errorf("%w: TensorType needs both Producer and New", ErrExchange)
	}
	if pyType == 0 {
		return nil, fmt.Errorf("%w: NULL type", ErrExchange)
	}
	if C.exchange_init() != 0 {
		return nil, ErrNoPython
	}
	publishMu.Lock()
	defer publishMu.Unlock()
	slot := -1
	for i := range published {
		e := published[i].Load()
		if e == nil {
			slot = i
			break
		}
		if e.typ == pyType {
			return e, nil
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("%w: no table left (%d types published)", ErrExchange, len(published))
	}
	e := &Exchange{slot: slot, typ: pyType, t: t, api: (*dlpack.ExchangeAPI)(unsafe.Pointer(C.exchange_table(C.int(slot))))}
	published[slot].Store(e) // before the type carries the table
	alloc := dlpack.PublishedExchangeAPI().ManagedTensorAllocator
	if C.exchange_publish(C.int(slot), C.uintptr_t(pyType), C.uintptr_t(alloc)) != 0 {
		published[slot].Store(nil)
		ClearError()
		return nil, fmt.Errorf("%w: the type does not take the attribute __dlpack_c_exchange_api__", ErrExchange)
	}
	return e, nil
}

// API returns the table (C memory, process lifetime): the pointer in the
// type's capsule.
func (e *Exchange) API() *dlpack.ExchangeAPI { return e.api }

// ExchangeStats counts exchange-API traffic in this process.
type ExchangeStats struct {
	// Calls of the entries of the tables this library published (all
	// types together), and how many of them failed.
	FromPyObject, ToPyObject, DLTensorFromPyObject, Allocator, CurrentWorkStream, Failures int64
	// Exports made for objects (one per object, on its first exchange),
	// those still held (by their object or by a tensor lent from them),
	// and tensors lent by managed_tensor_from_py_object_no_sync whose
	// deleter has not run yet.
	Exports, LiveExports, LiveLent int64
	// Python objects Go took in through their type's table, and through
	// __dlpack__ (the fallback for types without a usable table).
	TableImports, ProtocolImports int64
	// Python objects Go viewed through their type's
	// dltensor_from_py_object_no_sync (BorrowTensor).
	TableViews int64
}

var tableImports, protocolImports, tableViews atomic.Int64

// ReadExchangeStats returns the counters so far.
func ReadExchangeStats() ExchangeStats {
	var c C.exchange_counts
	C.exchange_read_counts(&c)
	return ExchangeStats{
		FromPyObject: int64(c.from_py), ToPyObject: int64(c.to_py), DLTensorFromPyObject: int64(c.dltensor),
		Allocator: int64(c.alloc), CurrentWorkStream: int64(c.stream), Failures: int64(c.failures),
		Exports: int64(c.exports), LiveExports: int64(c.exports_live), LiveLent: int64(c.lent_live),
		TableImports: tableImports.Load(), ProtocolImports: protocolImports.Load(), TableViews: tableViews.Load(),
	}
}

// raiseFor sets the exception of a failing entry: the pending one stays.
func raiseFor(err error) {
	if C.exchange_error_pending() != 0 {
		return
	}
	cs := C.CString(err.Error())
	defer C.free(unsafe.Pointer(cs))
	C.exchange_set_error(C.EXCHANGE_BUFFER_ERROR, cs)
}

// recovered turns a panic of a TensorType function, which would end the
// process inside a callback from C, into the entry's error.
func recovered(rc *C.int) {
	if r := recover(); r != nil {
		raiseFor(fmt.Errorf("%w: panic in a TensorType function: %v", ErrExchange, r))
		*rc = -1
	}
}

//export pycapsuleExchangeProduce
func pycapsuleExchangeProduce(slot C.int, obj C.uintptr_t, out **C.DLManagedTensorVersioned) (rc C.int) {
	defer recovered(&rc)
	e := published[slot].Load()
	if e == nil {
		raiseFor(fmt.Errorf("%w: no type published for this table", ErrExchange))
		return -1
	}
	m, err := e.produce(uintptr(obj))
	if err != nil {
		raiseFor(err)
		return -1
	}
	*out = (*C.DLManagedTensorVersioned)(unsafe.Pointer(m))
	return 0
}

// producer returns the producer behind obj, an instance of e's type.
func (e *Exchange) producer(obj uintptr) (dlpack.Producer, error) {
	p, err := e.t.Producer(obj)
	if err == nil && nilcheck.IsNil(p) {
		err = fmt.Errorf("%w: the object holds no producer", ErrExchange)
	}
	return p, err
}

func (e *Exchange) produce(obj uintptr) (*dlpack.ManagedTensorVersioned, error) {
	p, err := e.producer(obj)
	if err != nil {
		return nil, err
	}
	m, err := p.DLPack(dlpack.Request{})
	if err != nil {
		m.Close()
		return nil, err
	}
	if m.Versioned == nil {
		m.Close()
		return nil, fmt.Errorf("%w: the producer answered a versioned request with a legacy tensor", ErrExchange)
	}
	return m.Versioned, nil
}

//export pycapsuleExchangeToPy
func pycapsuleExchangeToPy(slot C.int, m *C.DLManagedTensorVersioned, out *C.uintptr_t) (rc C.int) {
	defer recovered(&rc)
	f, err := dlpack.Import(unsafe.Pointer(m)) // releases m on error
	if err != nil {
		raiseFor(err)
		return -1
	}
	e := published[slot].Load()
	if e == nil {
		f.Close()
		raiseFor(fmt.Errorf("%w: no type published for this table", ErrExchange))
		return -1
	}
	obj, err := func() (obj uintptr, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: panic in TensorType.New: %v", ErrExchange, r)
			}
		}()
		return e.t.New(f)
	}()
	if err != nil {
		f.Close()
		raiseFor(err)
		return -1
	}
	if obj == 0 {
		f.Close()
		raiseFor(fmt.Errorf("%w: TensorType.New returned no object", ErrExchange))
		return -1
	}
	*out = C.uintptr_t(obj)
	return 0
}

// names maps each attribute name IntAttr was asked for to its interned
// Python str (kept for the process lifetime); copied on write.
var (
	namesMu sync.Mutex
	names   atomic.Pointer[map[string]C.uintptr_t]
)

// IntAttr reads the int attribute name of obj (a borrowed reference), for
// a TensorType.Producer that finds its tensor by a key the instance
// carries. An error wraps ErrPython; the exception stays pending.
func IntAttr(obj uintptr, name string) (int64, error) {
	if obj == 0 {
		return 0, fmt.Errorf("%w: NULL object", ErrNoDLPack)
	}
	key, err := internedName(name)
	if err != nil {
		return 0, err
	}
	var x C.longlong
	if C.exchange_int_attr(C.uintptr_t(obj), key, &x) != 0 {
		return 0, pythonError("reading attribute " + name)
	}
	return int64(x), nil
}

func internedName(name string) (C.uintptr_t, error) {
	if m := names.Load(); m != nil {
		if key, ok := (*m)[name]; ok {
			return key, nil
		}
	}
	if C.exchange_init() != 0 {
		return 0, ErrNoPython
	}
	namesMu.Lock()
	defer namesMu.Unlock()
	old := names.Load()
	if old != nil {
		if key, ok := (*old)[name]; ok {
			return key, nil
		}
	}
	b := unsafe.StringData(name)
	key := C.exchange_intern((*C.char)(unsafe.Pointer(b)), C.size_t(len(name)))
	if key == 0 {
		return 0, pythonError("interning " + name)
	}
	m := map[string]C.uintptr_t{name: key}
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	names.Store(&m)
	return key, nil
}

// CallInt calls callable(x) (a borrowed reference) and returns the new
// reference to the result, for a TensorType.New that makes its instance
// through a Python factory. An error wraps ErrPython; the exception stays
// pending.
func CallInt(callable uintptr, x int64) (uintptr, error) {
	if callable == 0 {
		return 0, fmt.Errorf("%w: no factory (NULL)", ErrExchange)
	}
	if C.exchange_init() != 0 {
		return 0, ErrNoPython
	}
	r := C.exchange_call_int(C.uintptr_t(callable), C.longlong(x))
	if r == 0 {
		return 0, pythonError("the factory")
	}
	return uintptr(r), nil
}

// ---- Consumer side: other types' tables -------------------------------------

// apis caches validated tables by address (the spec makes them live for
// the process): *dlpack.ExchangeAPI, or nil for a table this package
// cannot use.
var apis sync.Map

// ExchangeAPIOf returns the validated DLPack 1.3 exchange table of obj's
// type (obj a borrowed reference): the table its __dlpack_c_exchange_api__
// capsule holds, walked along prev_api to a usable 1.x (x >= 3) version
// as dlpack.OpenExchangeAPI does. It returns nil when the type publishes
// none, or none this package can use (then __dlpack__ is the way).
func ExchangeAPIOf(obj uintptr) *dlpack.ExchangeAPI {
	if obj == 0 || C.exchange_init() != 0 {
		return nil
	}
	p := C.exchange_api_of(C.uintptr_t(obj))
	if p == nil {
		return nil
	}
	if v, ok := apis.Load(p); ok {
		return v.(*dlpack.ExchangeAPI)
	}
	var api *dlpack.ExchangeAPI
	if c, err := dlpack.OpenExchangeAPI(p); err == nil {
		api = c.API()
	}
	apis.Store(p, api)
	return api
}

// takeOf is what Import and Borrow take from obj. An instance of a type
// that carries one of this library's own tables gives the Go producer
// behind it, to be taken Go to Go (dlpack.From: no C block, no pinning).
// Another object whose type carries a usable table gives the tensor of its
// managed_tensor_from_py_object_no_sync; any other, the tensor its
// __dlpack__ hands over (or obj itself if it is a capsule).
func takeOf(obj uintptr) (dlpack.Producer, dlpack.Managed, error) {
	if obj != 0 && C.pycapsule_kind(C.uintptr_t(obj)) == 0 {
		api := ExchangeAPIOf(obj)
		if e := ownExchange(api); e != nil && C.exchange_is_ours(C.int(e.slot), C.uintptr_t(obj)) != 0 {
			p, err := e.producer(obj)
			if err != nil {
				return nil, dlpack.Managed{}, err
			}
			tableImports.Add(1)
			return p, dlpack.Managed{}, nil
		}
		if m, ok, err := managedFromTable(api, obj); ok {
			return nil, m, err
		}
	}
	m, err := managedOf(obj, consumerArgs(), false)
	return nil, m, err
}

// ownExchange returns the Exchange whose table api is, or nil.
func ownExchange(api *dlpack.ExchangeAPI) *Exchange {
	for i := range published {
		if e := published[i].Load(); e != nil && e.api == api {
			return e
		}
	}
	return nil
}

// BorrowTensor is Borrow by the fastest route DLPack 1.3 offers: when
// obj's type publishes an exchange table (ExchangeAPIOf) with
// dltensor_from_py_object_no_sync, and obj is not one of this library's
// own objects, the entry fills a non-owning DLTensor of obj's tensor,
// which dlpack.BorrowTensor checks field by field and lends to fn: no
// capsule, no managed struct, no deleter. That DLTensor lives as long as
// obj, which the caller holds for the call. Otherwise it is Borrow.
//
// A DLTensor carries no flags: on the table route the Foreign is
// read-only unless opts include dlpack.AssumeWritable (the caller's word
// that obj may be written), and, as with every no_sync entry, the caller
// orders device work after the producer's current_work_stream. An entry
// that fails is an error wrapping ErrPython (the exception is pending) or
// ErrExchange. fn's error is returned as it is.
func BorrowTensor(obj uintptr, fn func(dlpack.Foreign) error, opts ...dlpack.ImportOption) error {
	if err := checkGIL(); err != nil {
		return err
	}
	if obj != 0 && C.pycapsule_kind(C.uintptr_t(obj)) == 0 {
		if api := ExchangeAPIOf(obj); api != nil && api.DLTensorFromPyObjectNoSync != 0 && ownExchange(api) == nil {
			t := new(C.DLTensor)
			if rc := C.exchange_call_dltensor(C.uintptr_t(api.DLTensorFromPyObjectNoSync), C.uintptr_t(obj), t); rc != 0 {
				if C.exchange_error_pending() != 0 {
					return pythonError("dltensor_from_py_object_no_sync")
				}
				return fmt.Errorf("%w: dltensor_from_py_object_no_sync returned %d", ErrExchange, int(rc))
			}
			tableViews.Add(1)
			return dlpack.BorrowTensor(unsafe.Pointer(t), fn, opts...)
		}
	}
	return Borrow(obj, fn, opts...)
}

// managedFromTable takes obj's tensor through api's
// managed_tensor_from_py_object_no_sync. ok is false when the table has no
// such entry (use __dlpack__).
func managedFromTable(api *dlpack.ExchangeAPI, obj uintptr) (m dlpack.Managed, ok bool, err error) {
	if api == nil || api.ManagedTensorFromPyObjectNoSync == 0 {
		return dlpack.Managed{}, false, nil
	}
	if e := ownExchange(api); e != nil && C.exchange_is_ours(C.int(e.slot), C.uintptr_t(obj)) != 0 {
		// One of this library's own objects: what the entry would do,
		// without leaving Go for C and coming back.
		v, err := e.produce(obj)
		if err != nil {
			return dlpack.Managed{}, true, err
		}
		tableImports.Add(1)
		return dlpack.Managed{Versioned: v}, true, nil
	}
	var out *C.DLManagedTensorVersioned
	rc := C.exchange_call_from_py(C.uintptr_t(api.ManagedTensorFromPyObjectNoSync), C.uintptr_t(obj), &out)
	if rc != 0 {
		if out != nil { // a tensor despite the failure: ours to release
			dlpack.Managed{Versioned: (*dlpack.ManagedTensorVersioned)(unsafe.Pointer(out))}.Close()
		}
		if C.exchange_error_pending() != 0 {
			return dlpack.Managed{}, true, pythonError("managed_tensor_from_py_object_no_sync")
		}
		return dlpack.Managed{}, true, fmt.Errorf("%w: managed_tensor_from_py_object_no_sync returned %d", ErrExchange, int(rc))
	}
	if out == nil {
		return dlpack.Managed{}, true, fmt.Errorf("%w: managed_tensor_from_py_object_no_sync returned no tensor", ErrExchange)
	}
	tableImports.Add(1)
	return dlpack.Managed{Versioned: (*dlpack.ManagedTensorVersioned)(unsafe.Pointer(out))}, true, nil
}
