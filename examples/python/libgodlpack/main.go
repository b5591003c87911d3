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
	"runtime"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/godlpack/dlpack/pycapsule"
)

// goTensor is a Go-owned tensor that Python refers to by id.
type goTensor struct {
	addr     uintptr // first element
	shape    []int64
	readOnly bool
	// export lends the tensor (or, with copy, a copy of it) to a consumer.
	export func(versioned, copy bool, opts []dlpack.ExportOption) (unsafe.Pointer, error)
}

// exporter returns the export function of a typed Go slice.
func exporter[T dlpack.Element](data []T, shape []int64) func(bool, bool, []dlpack.ExportOption) (unsafe.Pointer, error) {
	return func(versioned, copy bool, opts []dlpack.ExportOption) (unsafe.Pointer, error) {
		d := data
		if copy {
			d = append([]T(nil), data...)
		}
		if versioned {
			m, err := dlpack.Export(d, shape, opts...)
			return unsafe.Pointer(m), err
		}
		m, err := dlpack.ExportLegacy(d, shape, opts...)
		return unsafe.Pointer(m), err
	}
}

// typed makes a Go slice of T holding a copy of raw (native byte order).
func typed[T dlpack.Element](raw []byte, shape []int64) *goTensor {
	var z T
	n := len(raw) / int(unsafe.Sizeof(z))
	data := make([]T, n)
	if n > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(raw)), raw)
	}
	t := &goTensor{shape: shape, export: exporter(data, shape)}
	if n > 0 {
		t.addr = uintptr(unsafe.Pointer(&data[0]))
	}
	return t
}

// elementKind holds what the library does with one Go element type.
type elementKind struct {
	make    func(raw []byte, shape []int64) *goTensor
	copyOut func(f dlpack.Foreign, dst []byte) (int, error)
}

func kindOf[T dlpack.Element]() elementKind {
	return elementKind{make: typed[T], copyOut: copyTyped[T]}
}

// kinds lists every element type the library exchanges, once.
var kinds = map[dlpack.DataType]elementKind{
	dlpack.Bool: kindOf[bool](), dlpack.Int8: kindOf[int8](), dlpack.Int16: kindOf[int16](),
	dlpack.Int32: kindOf[int32](), dlpack.Int64: kindOf[int64](), dlpack.Uint8: kindOf[uint8](),
	dlpack.Uint16: kindOf[uint16](), dlpack.Uint32: kindOf[uint32](), dlpack.Uint64: kindOf[uint64](),
	dlpack.Float16: kindOf[minifloat.Float16](), dlpack.BFloat16: kindOf[minifloat.BFloat16](),
	dlpack.Float32: kindOf[float32](), dlpack.Float64: kindOf[float64](),
	dlpack.Complex64: kindOf[complex64](), dlpack.Complex128: kindOf[complex128](),
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
	data := make([]float64, n)
	for i := range data {
		data[i] = float64(i)
	}
	shape := []int64{int64(rows), int64(cols)}
	t := &goTensor{shape: shape, readOnly: readOnly != 0, export: exporter(data, shape)}
	if n > 0 {
		t.addr = uintptr(unsafe.Pointer(&data[0]))
	}
	return register(t)
}

func register(t *goTensor) C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	nextID++
	tensors[nextID] = t
	return C.int64_t(nextID)
}

// godlpack_from_bytes makes a Go tensor of the given DLPack data type and
// shape holding a copy of nbytes at data; returns its id, or -1 with a
// ValueError set.
//
//export godlpack_from_bytes
func godlpack_from_bytes(code, bits C.int, shape *C.int64_t, ndim C.int, data unsafe.Pointer, nbytes C.int64_t, readOnly C.int) C.int64_t {
	dt := dlpack.DataType{Code: dlpack.DataTypeCode(code), Bits: uint8(bits), Lanes: 1}
	sh := append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(ndim))...)
	raw := unsafe.Slice((*byte)(data), int(nbytes))
	k, ok := kinds[dt]
	if !ok {
		pycapsule.SetError(false, "godlpack: no Go element type for "+dt.String())
		return -1
	}
	t := k.make(raw, sh)
	t.readOnly = readOnly != 0
	return register(t)
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
	if t := tensors[int64(id)]; t != nil {
		return C.uintptr_t(t.addr)
	}
	return 0
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
	var opts []dlpack.ExportOption
	if copyMode == 1 {
		opts = append(opts, dlpack.Copied())
	} else if t.readOnly {
		if !versioned {
			return fail("godlpack: cannot export a read-only tensor as a legacy capsule (it cannot signal read-only); ask for max_version >= (1, 0) or copy=True")
		}
		opts = append(opts, dlpack.ReadOnly())
	}
	m, err := t.export(versioned, copyMode == 1, opts)
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

// borrowCapsule consumes a DLPack capsule (borrowed reference), lends its
// tensor to use and releases it. On failure it sets the Python exception
// (ValueError for a capsule that is not unconsumed, BufferError for a
// tensor Go rejects) and reports false.
func borrowCapsule(capsule C.uintptr_t, use func(f dlpack.Foreign, versioned bool) error) bool {
	m, versioned, err := pycapsule.Consume(uintptr(capsule))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return false
	}
	fn := func(f dlpack.Foreign) error { return use(f, versioned) }
	if versioned {
		err = dlpack.Borrow(m, fn)
	} else {
		err = dlpack.BorrowLegacy(m, fn)
	}
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return false
	}
	return true
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
	var s float64
	var facts C.int
	ok := borrowCapsule(capsule, func(f dlpack.Foreign, versioned bool) error {
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
	})
	if !ok {
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

// godlpack_copy_out imports a DLPack capsule (borrowed reference), copies
// its elements in row-major order into out (cap bytes; native byte order)
// and releases it. It writes the data type code and bits to *code and
// *bits and returns the bytes written, or -1 with an exception set.
//
//export godlpack_copy_out
func godlpack_copy_out(capsule C.uintptr_t, out unsafe.Pointer, capBytes C.int64_t, code, bits *C.int) C.int64_t {
	dst := unsafe.Slice((*byte)(out), int(capBytes))
	var n int
	ok := borrowCapsule(capsule, func(f dlpack.Foreign, _ bool) error {
		dt := f.DataType()
		*code, *bits = C.int(dt.Code), C.int(dt.Bits)
		var err error
		n, err = copyOut(f, dst)
		return err
	})
	if !ok {
		return -1
	}
	return C.int64_t(n)
}

func copyOut(f dlpack.Foreign, dst []byte) (int, error) {
	k, ok := kinds[f.DataType()]
	if !ok {
		return 0, fmt.Errorf("godlpack: no Go element type for %v", f.DataType())
	}
	return k.copyOut(f, dst)
}

func copyTyped[T dlpack.Element](f dlpack.Foreign, dst []byte) (int, error) {
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return 0, err
	}
	var z T
	size := int(unsafe.Sizeof(z))
	if v.Len()*size > len(dst) {
		return 0, fmt.Errorf("godlpack: %d bytes needed, %d given", v.Len()*size, len(dst))
	}
	if v.Len() == 0 {
		return 0, nil
	}
	out := unsafe.Slice((*T)(unsafe.Pointer(&dst[0])), v.Len())
	_, err = v.CopyTo(out)
	return v.Len() * size, err
}

// godlpack_go_heap runs a GC and returns the Go heap in use, in bytes.
//
//export godlpack_go_heap
func godlpack_go_heap() C.int64_t {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return C.int64_t(ms.HeapAlloc)
}

//export godlpack_outstanding
func godlpack_outstanding() C.int64_t { return C.int64_t(dlpack.Outstanding()) }

func main() {}
