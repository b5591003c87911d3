// Command libgodlpack is a C shared library that gives Python DLPack access
// to Go tensors and lets Go consume Python's, through package pycapsule:
//
//	go build -buildmode=c-shared -o libgodlpack.so ./examples/python/libgodlpack
//
// godlpack.py loads it with ctypes.PyDLL (every call holds the GIL).
package main

// #include <stdint.h>
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// goTensor is a Go-owned tensor that Python refers to by id.
type goTensor struct {
	data     []float64
	shape    []int64
	readOnly bool
}

var (
	mu      sync.Mutex
	tensors = map[int64]*goTensor{}
	nextID  int64
)

//export godlpack_init
func godlpack_init() C.int {
	if pycapsule.Init() != nil {
		return -1
	}
	return 0
}

// godlpack_arange makes a Go float64 tensor 0, 1, ..., rows*cols-1 of
// shape (rows, cols) and returns its id.
//
//export godlpack_arange
func godlpack_arange(rows, cols C.int64_t, readOnly C.int) C.int64_t {
	n := int64(rows) * int64(cols)
	t := &goTensor{data: make([]float64, n), shape: []int64{int64(rows), int64(cols)}, readOnly: readOnly != 0}
	for i := range t.data {
		t.data[i] = float64(i)
	}
	mu.Lock()
	defer mu.Unlock()
	nextID++
	tensors[nextID] = t
	return C.int64_t(nextID)
}

//export godlpack_free
func godlpack_free(id C.int64_t) {
	mu.Lock()
	defer mu.Unlock()
	delete(tensors, int64(id)) // exports still held by consumers keep the data alive
}

//export godlpack_data_addr
func godlpack_data_addr(id C.int64_t) C.uintptr_t {
	mu.Lock()
	defer mu.Unlock()
	t := tensors[int64(id)]
	if t == nil || len(t.data) == 0 {
		return 0
	}
	return C.uintptr_t(uintptr(unsafe.Pointer(&t.data[0])))
}

// godlpack_dlpack implements GoTensor.__dlpack__: versioned 1.3 when the
// consumer's max major version is >= 1, legacy otherwise (maxMajor < 0
// means None); copy is -1 (None), 0 or 1. Returns a new capsule reference,
// or 0 with a BufferError set.
//
//export godlpack_dlpack
func godlpack_dlpack(id C.int64_t, maxMajor C.int, copyMode C.int) C.uintptr_t {
	mu.Lock()
	t := tensors[int64(id)]
	mu.Unlock()
	fail := func(msg string) C.uintptr_t { pycapsule.SetError(true, msg); return 0 }
	if t == nil {
		return fail("godlpack: tensor was freed")
	}
	versioned := maxMajor >= 1
	data := t.data
	var opts []dlpack.ExportOption
	if copyMode == 1 {
		data = append([]float64(nil), t.data...)
		opts = append(opts, dlpack.Copied())
	} else if t.readOnly {
		if !versioned {
			return fail("godlpack: cannot export a read-only tensor as a legacy capsule (it cannot signal read-only); ask for max_version >= (1, 0) or copy=True")
		}
		opts = append(opts, dlpack.ReadOnly())
	}
	var m unsafe.Pointer
	var err error
	if versioned {
		var v *dlpack.ManagedTensorVersioned
		v, err = dlpack.Export(data, t.shape, opts...)
		m = unsafe.Pointer(v)
	} else {
		var l *dlpack.ManagedTensor
		l, err = dlpack.ExportLegacy(data, t.shape, opts...)
		m = unsafe.Pointer(l)
	}
	if err != nil {
		return fail(err.Error())
	}
	capsule := pycapsule.New(m, versioned)
	if capsule == 0 { // Python set the error; the tensor is still ours
		releaseUnwrapped(m, versioned)
	}
	return C.uintptr_t(capsule)
}

func releaseUnwrapped(m unsafe.Pointer, versioned bool) {
	if versioned {
		f, _ := dlpack.Import(m)
		f.Close()
	} else {
		f, _ := dlpack.ImportLegacy(m)
		f.Close()
	}
}

// godlpack_consume imports a DLPack capsule (borrowed reference) into Go,
// writes the sum of its elements (float32, float64 or int64, any strides)
// to *sum and facts about it to *info (bit 0 versioned, bit 1 read-only,
// bit 2 compact), and releases it. Returns 0, or -1 with a Python
// exception set (ValueError for a capsule already consumed, BufferError for
// a tensor Go rejects).
//
//export godlpack_consume
func godlpack_consume(capsule C.uintptr_t, sum *C.double, info *C.int) C.int {
	m, versioned, err := pycapsule.Consume(uintptr(capsule))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	var s float64
	var facts C.int
	use := func(f dlpack.Foreign) error {
		if versioned {
			facts |= 1
		}
		if !f.Writable() {
			facts |= 2
		}
		if f.IsContiguous() {
			facts |= 4
		}
		switch f.DataType() {
		case dlpack.Float64:
			return sumOf[float64](f, &s)
		case dlpack.Float32:
			return sumOf[float32](f, &s)
		case dlpack.Int64:
			return sumOf[int64](f, &s)
		}
		return fmt.Errorf("godlpack: cannot sum %v", f.DataType())
	}
	if versioned {
		err = dlpack.Borrow(m, use)
	} else {
		err = dlpack.BorrowLegacy(m, use)
	}
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return -1
	}
	*sum, *info = C.double(s), facts
	return 0
}

func sumOf[T float32 | float64 | int64](f dlpack.Foreign, s *float64) error {
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return err
	}
	for _, x := range v.All() {
		*s += float64(x)
	}
	return nil
}

//export godlpack_outstanding
func godlpack_outstanding() C.int64_t { return C.int64_t(dlpack.Outstanding()) }

func main() {}
