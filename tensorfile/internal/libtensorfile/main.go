// Command libtensorfile is a C shared library that lets the Python tests of
// package tensorfile open files in Go and take their tensors with
// numpy.from_dlpack, to check that NumPy shares the Go mapping:
//
//	go build -buildmode=c-shared -o libtensorfile.so ./tensorfile/internal/libtensorfile
//
// tensorfile/testdata/share.py loads it with ctypes.PyDLL (every call
// holds the GIL).
package main

// #include <stdint.h>
import "C"

import (
	"sync"

	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/tensorfile"
)

var (
	mu     sync.Mutex
	files  = map[int64]*tensorfile.File{}
	nextID int64
)

//export tf_init
func tf_init() C.int {
	if pycapsule.Init() != nil {
		return -1
	}
	return 0
}

// tf_open opens path as kind 0 (.npy), 1 (.npz) or 2 (safetensors),
// read-write if rw; it returns a file id, or -1 with a ValueError set.
//
//export tf_open
func tf_open(path *C.char, kind, rw C.int) C.int64_t {
	var opts []tensorfile.Option
	if rw != 0 {
		opts = append(opts, tensorfile.ReadWrite())
	}
	var f *tensorfile.File
	var err error
	switch kind {
	case 0:
		f, err = tensorfile.OpenNPY(C.GoString(path), opts...)
	case 1:
		f, err = tensorfile.OpenNPZ(C.GoString(path))
	default:
		f, err = tensorfile.OpenSafetensors(C.GoString(path), opts...)
	}
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	mu.Lock()
	defer mu.Unlock()
	nextID++
	files[nextID] = f
	return C.int64_t(nextID)
}

func lookup(id C.int64_t) *tensorfile.File {
	mu.Lock()
	defer mu.Unlock()
	return files[int64(id)]
}

// tf_range stores the file's mapping address and length.
//
//export tf_range
func tf_range(id C.int64_t, addr *C.uintptr_t, size *C.int64_t) {
	if f := lookup(id); f != nil {
		a, n := f.MappedRange()
		*addr, *size = C.uintptr_t(a), C.int64_t(n)
	}
}

// tf_dlpack is __dlpack__ for tensor index of file id: the four
// arguments are the Python objects __dlpack__ received (borrowed), read by
// pycapsule.DLPack as the array API rules. It returns a new capsule
// reference, or 0 with the exception set.
//
//export tf_dlpack
func tf_dlpack(id C.int64_t, index C.int, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	f := lookup(id)
	if f == nil || int(index) >= len(f.Tensors()) {
		pycapsule.SetError(true, "libtensorfile: no such file or tensor")
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(f.Tensors()[index], uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// tf_close closes file id (its exports stay valid).
//
//export tf_close
func tf_close(id C.int64_t) {
	mu.Lock()
	f := files[int64(id)]
	delete(files, int64(id))
	mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// tf_live returns tensorfile.LiveMappings().
//
//export tf_live
func tf_live() C.int64_t { return C.int64_t(tensorfile.LiveMappings()) }

func main() {}
