// Command libgodlpack is a C shared library that gives Python DLPack access
// to Go tensors and lets Go consume and re-export Python's, through
// package pycapsule:
//
//	go build -buildmode=c-shared -o libgodlpack.so ./examples/python/libgodlpack
//
// godlpack.py loads it with ctypes.PyDLL (every call holds the GIL). Python
// refers to a Go tensor by an id in a registry; each is a dlpack.Producer
// (a dlpack.Array of Go memory, an imported dlpack.Foreign, or a wrapped
// Python object), and __dlpack__ is pycapsule.DLPack on it.
package main

// #include <stdint.h>
import "C"

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/godlpack/dlpack/pycapsule"
)

// tensor is a registry entry: what Python's GoTensor refers to.
type tensor struct {
	p     dlpack.Producer
	addr  uintptr      // first element, 0 if unknown (a wrapped object)
	close func() error // nil for Go memory
}

var (
	mu      sync.Mutex
	tensors = map[int64]*tensor{}
	nextID  int64
)

func register(t *tensor) C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	nextID++
	tensors[nextID] = t
	return C.int64_t(nextID)
}

func lookup(id C.int64_t) *tensor {
	mu.Lock()
	defer mu.Unlock()
	return tensors[int64(id)]
}

//export godlpack_init
func godlpack_init() C.int {
	if pycapsule.Init() != nil {
		return -1
	}
	return 0
}

// arrayOf registers a Go array. Its memory comes from dlpack.AlignedSlice,
// so consumers that share only aligned memory (JAX) share it.
func arrayOf[T dlpack.Element](a *dlpack.Array[T]) C.int64_t {
	t := &tensor{p: a}
	if len(a.Data) > 0 {
		t.addr = uintptr(unsafe.Pointer(&a.Data[a.Offset]))
	}
	return register(t)
}

// godlpack_arange makes a Go float64 tensor 0, 1, ..., rows*cols-1 of
// shape (rows, cols) and returns its id.
//
//export godlpack_arange
func godlpack_arange(rows, cols C.int64_t, readOnly C.int) C.int64_t {
	data := dlpack.AlignedSlice[float64](int(rows * cols))
	for i := range data {
		data[i] = float64(i)
	}
	a := dlpack.NewArray(data, []int64{int64(rows), int64(cols)})
	a.ReadOnly = readOnly != 0
	return arrayOf(a)
}

// elementKind holds what the library does with one Go element type.
type elementKind struct {
	size    int
	make    func(raw []byte, shape []int64, readOnly bool) C.int64_t
	copyOut func(f dlpack.Foreign, dst []byte) (int, error)
	sum     func(f dlpack.Foreign) (complex128, error)
}

func kindOf[T dlpack.Element](toComplex func(T) complex128) elementKind {
	var z T
	return elementKind{size: int(unsafe.Sizeof(z)), make: fromRaw[T], copyOut: copyTyped[T],
		sum: func(f dlpack.Foreign) (complex128, error) { return sumTyped(f, toComplex) }}
}

func realOf[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64](x T) complex128 {
	return complex(float64(x), 0)
}

// kinds lists every element type the library exchanges, once.
var kinds = map[dlpack.DataType]elementKind{
	dlpack.Bool: kindOf(func(x bool) complex128 {
		if x {
			return 1
		}
		return 0
	}),
	dlpack.Int8: kindOf(realOf[int8]), dlpack.Int16: kindOf(realOf[int16]),
	dlpack.Int32: kindOf(realOf[int32]), dlpack.Int64: kindOf(realOf[int64]),
	dlpack.Uint8: kindOf(realOf[uint8]), dlpack.Uint16: kindOf(realOf[uint16]),
	dlpack.Uint32: kindOf(realOf[uint32]), dlpack.Uint64: kindOf(realOf[uint64]),
	dlpack.Float16:  kindOf(func(x minifloat.Float16) complex128 { return complex(float64(x.Float32()), 0) }),
	dlpack.BFloat16: kindOf(func(x minifloat.BFloat16) complex128 { return complex(float64(x.Float32()), 0) }),
	dlpack.Float32:  kindOf(realOf[float32]), dlpack.Float64: kindOf(realOf[float64]),
	dlpack.Complex64:  kindOf(func(x complex64) complex128 { return complex128(x) }),
	dlpack.Complex128: kindOf(func(x complex128) complex128 { return x }),
}

// fromRaw registers a Go array of T holding a copy of raw (native byte
// order, row-major), which the caller checked is exactly the shape's size.
func fromRaw[T dlpack.Element](raw []byte, shape []int64, readOnly bool) C.int64_t {
	var z T
	data := dlpack.AlignedSlice[T](len(raw) / int(unsafe.Sizeof(z)))
	if len(data) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(raw)), raw)
	}
	return arrayOf(&dlpack.Array[T]{Data: data, Shape: shape, ReadOnly: readOnly})
}

// godlpack_from_bytes makes a Go tensor of the given DLPack data type and
// shape holding a copy of nbytes at data; returns its id, or -1 with a
// ValueError set: an element type Go has no type for, a negative
// dimension, or nbytes other than the shape's element count times the
// element size (a trailing partial element is refused, never dropped).
//
//export godlpack_from_bytes
func godlpack_from_bytes(code, bits_ C.int, shape *C.int64_t, ndim C.int, data unsafe.Pointer, nbytes C.int64_t, readOnly C.int) C.int64_t {
	dt := dlpack.DataType{Code: dlpack.DataTypeCode(code), Bits: uint8(bits_), Lanes: 1}
	k, ok := kinds[dt]
	if !ok {
		pycapsule.SetError(false, "godlpack: no Go element type for "+dt.String())
		return -1
	}
	sh := make([]int64, max(int(ndim), 0)) // not nil: a 0-d shape is (), not NewArray's default
	if ndim > 0 {
		copy(sh, unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(ndim)))
	}
	want, err := byteSize(sh, k.size)
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	if int64(nbytes) != want {
		pycapsule.SetError(false, fmt.Sprintf("godlpack: nbytes = %d, but shape %v of %v takes %d bytes (%d per element)",
			int64(nbytes), sh, dt, want, k.size))
		return -1
	}
	var raw []byte
	if nbytes > 0 {
		raw = unsafe.Slice((*byte)(data), int(nbytes))
	}
	return k.make(raw, sh, readOnly != 0)
}

// byteSize is the bytes of a compact tensor of the shape, overflow-checked.
func byteSize(shape []int64, size int) (int64, error) {
	n := uint64(size)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("godlpack: shape[%d] = %d (negative dimension)", i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("godlpack: shape %v is too large", shape)
		}
		n = lo
	}
	return int64(n), nil
}

// godlpack_import takes a Python object with __dlpack__ (or a capsule)
// into Go as an owned dlpack.Foreign, held in the registry until
// godlpack_free, and returns its id, or -1 with an exception set (the
// producer's own, or BufferError for a tensor Go rejects). Handed on, the
// Foreign is re-exported without a copy.
//
//export godlpack_import
func godlpack_import(obj C.uintptr_t, assumeWritable C.int) C.int64_t {
	var opts []dlpack.ImportOption
	if assumeWritable != 0 {
		opts = append(opts, dlpack.AssumeWritable())
	}
	f, err := pycapsule.Import(uintptr(obj), opts...)
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return register(&tensor{p: f, addr: f.DataAddr(), close: f.Close})
}

// godlpack_wrap makes a Python object with __dlpack__ a Go producer that
// passes every request on to it (pycapsule.Object); returns its id, or -1
// with an exception set.
//
//export godlpack_wrap
func godlpack_wrap(obj C.uintptr_t) C.int64_t {
	o, err := pycapsule.Wrap(uintptr(obj))
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return register(&tensor{p: o, close: o.Close})
}

// godlpack_free drops Python's handle: an imported tensor is closed (its
// producer's deleter runs once the consumers it was handed on to are done
// too), a wrapped object released. Exports still held by consumers keep
// Go memory alive.
//
//export godlpack_free
func godlpack_free(id C.int64_t) {
	mu.Lock()
	t := tensors[int64(id)]
	delete(tensors, int64(id))
	mu.Unlock()
	if t != nil && t.close != nil {
		t.close()
	}
}

// godlpack_live returns the number of tensors in the registry.
//
//export godlpack_live
func godlpack_live() C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	return C.int64_t(len(tensors))
}

//export godlpack_data_addr
func godlpack_data_addr(id C.int64_t) C.uintptr_t {
	if t := lookup(id); t != nil {
		return C.uintptr_t(t.addr)
	}
	return 0
}

// godlpack_dlpack is GoTensor.__dlpack__ (the four arguments are borrowed
// references): a new capsule reference, or 0 with an exception set.
//
//export godlpack_dlpack
func godlpack_dlpack(id C.int64_t, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	t := lookup(id)
	if t == nil {
		pycapsule.SetError(true, "godlpack: the tensor was freed")
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(t.p, uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// godlpack_dlpack_device is GoTensor.__dlpack_device__.
//
//export godlpack_dlpack_device
func godlpack_dlpack_device(id C.int64_t) C.uintptr_t {
	t := lookup(id)
	if t == nil {
		pycapsule.SetError(true, "godlpack: the tensor was freed")
		return 0
	}
	return C.uintptr_t(pycapsule.DLPackDevice(t.p))
}

// borrow lends obj's tensor (pycapsule.Borrow) to use and releases it. On
// failure it sets the Python exception and reports false.
func borrow(obj C.uintptr_t, use func(f dlpack.Foreign) error) bool {
	if err := pycapsule.Borrow(uintptr(obj), use); err != nil {
		pycapsule.Raise(err)
		return false
	}
	return true
}

// godlpack_consume imports any DLPack producer (or capsule) into Go, any
// element type and strides, writes the sum of its elements (as complex;
// bools count as 1) to *re, *im, its data type code to *code and facts
// about it to *info (bit 0 versioned, bit 1 read-only, bit 2 compact), and
// releases it. Returns 0, or -1 with a Python exception set.
//
//export godlpack_consume
func godlpack_consume(obj C.uintptr_t, re, im *C.double, code, info *C.int) C.int {
	var s complex128
	var facts C.int
	ok := borrow(obj, func(f dlpack.Foreign) error {
		if !f.Legacy() {
			facts |= 1
		}
		if !f.Writable() {
			facts |= 2
		}
		if f.IsContiguous() {
			facts |= 4
		}
		k, ok := kinds[f.DataType()]
		if !ok {
			return fmt.Errorf("godlpack: cannot sum %v", f.DataType())
		}
		*code = C.int(f.DataType().Code)
		var err error
		s, err = k.sum(f)
		return err
	})
	if !ok {
		return -1
	}
	*re, *im, *info = C.double(real(s)), C.double(imag(s)), facts
	return 0
}

func sumTyped[T dlpack.Element](f dlpack.Foreign, toComplex func(T) complex128) (complex128, error) {
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return 0, err
	}
	var s complex128
	for _, x := range v.All() {
		s += toComplex(x)
	}
	return s, nil
}

// godlpack_copy_out imports any DLPack producer (or capsule), copies its
// elements in row-major order into out (cap bytes; native byte order) and
// releases it. It writes the data type code and bits to *code and *bits
// and returns the bytes written, or -1 with an exception set (BufferError
// when out is too small).
//
//export godlpack_copy_out
func godlpack_copy_out(obj C.uintptr_t, out unsafe.Pointer, capBytes C.int64_t, code, bits *C.int) C.int64_t {
	dst := unsafe.Slice((*byte)(out), int(capBytes))
	var n int
	ok := borrow(obj, func(f dlpack.Foreign) error {
		dt := f.DataType()
		*code, *bits = C.int(dt.Code), C.int(dt.Bits)
		k, ok := kinds[dt]
		if !ok {
			return fmt.Errorf("godlpack: no Go element type for %v", dt)
		}
		var err error
		n, err = k.copyOut(f, dst)
		return err
	})
	if !ok {
		return -1
	}
	return C.int64_t(n)
}

var errSmall = errors.New("godlpack: output buffer too small")

func copyTyped[T dlpack.Element](f dlpack.Foreign, dst []byte) (int, error) {
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return 0, err
	}
	var z T
	size := int(unsafe.Sizeof(z))
	if v.Len()*size > len(dst) {
		return 0, fmt.Errorf("%w: %d bytes needed, %d given", errSmall, v.Len()*size, len(dst))
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
