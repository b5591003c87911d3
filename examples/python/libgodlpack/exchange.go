package main

// #include <stdint.h>
import "C"

import (
	"errors"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// factory is godlpack.py's _from_id(id) -> GoTensor, a module-level
// function the module keeps alive (a borrowed reference).
var factory uintptr

var errFreed = errors.New("godlpack: the tensor was freed")

// goTensorType reads and makes GoTensor instances for the exchange API: an
// instance carries its registry id in _id.
var goTensorType = pycapsule.TensorType{
	Producer: func(obj uintptr) (dlpack.Producer, error) {
		id, err := pycapsule.IntAttr(obj, "_id")
		if err != nil {
			return nil, err
		}
		t := lookup(C.int64_t(id))
		if t == nil {
			return nil, errFreed
		}
		return t.p, nil
	},
	New: func(f dlpack.Foreign) (uintptr, error) {
		id := register(&tensor{p: f, addr: f.DataAddr(), close: f.Close})
		obj, err := pycapsule.CallInt(factory, int64(id))
		if err != nil {
			mu.Lock()
			delete(tensors, int64(id)) // f stays the caller's to close
			mu.Unlock()
		}
		return obj, err
	},
}

// godlpack_publish gives the class typ (GoTensor) the DLPack 1.3 C
// exchange table (pycapsule.Publish); fromID is godlpack.py's factory.
// Returns 0, or -1 with an exception set.
//
//export godlpack_publish
func godlpack_publish(typ, fromID C.uintptr_t) C.int {
	factory = uintptr(fromID)
	if _, err := pycapsule.Publish(uintptr(typ), goTensorType); err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return 0
}

// godlpack_exchange_stats writes pycapsule.ReadExchangeStats to out[0:12]:
// from_py, to_py, dltensor, allocator, stream, failures, exports, live
// exports, live lent tensors, imports through a table, imports through
// __dlpack__, views through a table's DLTensor entry.
//
//export godlpack_exchange_stats
func godlpack_exchange_stats(out *C.int64_t) {
	s := pycapsule.ReadExchangeStats()
	v := []int64{s.FromPyObject, s.ToPyObject, s.DLTensorFromPyObject, s.Allocator, s.CurrentWorkStream,
		s.Failures, s.Exports, s.LiveExports, s.LiveLent, s.TableImports, s.ProtocolImports, s.TableViews}
	copy(unsafe.Slice((*int64)(unsafe.Pointer(out)), len(v)), v)
}

// godlpack_take_many takes obj's tensor into Go n times (pycapsule.Borrow:
// through obj's type's exchange table if it has one, else __dlpack__) and
// releases it each time: the exchange alone, for bench/exchange_compare.py.
// Returns 0, or -1 with an exception set.
//
//export godlpack_take_many
func godlpack_take_many(obj C.uintptr_t, n C.int64_t) C.int {
	for i := int64(0); i < int64(n); i++ {
		if err := pycapsule.Borrow(uintptr(obj), func(dlpack.Foreign) error { return nil }); err != nil {
			pycapsule.Raise(err)
			return -1
		}
	}
	return 0
}

// godlpack_view_many views obj's tensor in Go n times (pycapsule.BorrowTensor:
// through the DLTensor entry of obj's type's exchange table if it has one,
// else as godlpack_take_many), each view ended at once: the
// exchange alone, for bench/exchange_compare.py. Returns 0, or -1 with an
// exception set.
//
//export godlpack_view_many
func godlpack_view_many(obj C.uintptr_t, n C.int64_t) C.int {
	for i := int64(0); i < int64(n); i++ {
		if err := pycapsule.BorrowTensor(uintptr(obj), func(dlpack.Foreign) error { return nil }); err != nil {
			pycapsule.Raise(err)
			return -1
		}
	}
	return 0
}
