// Command libpybridges is the one C shared library that puts the bridges
// inside a Python process, for the tests that compare each bridge with
// its Python peer (dlimage with Pillow, dlarrow with pyarrow, tensorfile
// with NumPy and safetensors, dlonnx with onnxruntime's Python API,
// dlgomlx with NumPy and JAX) and for the PNG and ONNX examples:
//
//	go build -buildmode=c-shared -o .build/libpybridges.so ./internal/libpybridges
//
// Python loads it with ctypes.PyDLL (every call holds the GIL), from the
// path in $PYBRIDGES_LIB. This file holds what every bridge shares: the
// registry of the Go values Python refers to by id, pybridges_init,
// pybridges_free, and the counters the tests read at the end. Each bridge
// is one more file of exported functions named after its package
// (image.go: dlimage_*, arrow.go: dlarrow_*, tensorfile.go: tensorfile_*,
// onnx.go: dlonnx_*, gomlx.go: dlgomlx_*), with a Python helper that
// loads this library (examples/png/goimage.py, dlarrow/python/godlarrow.py,
// tensorfile/testdata/share.py, examples/onnx/goort.py,
// dlgomlx/testdata/mlp.py).
//
// Adding a bridge adds a file here, not a library: its exported functions
// register the bridge's values (register, lookup) and answer __dlpack__
// with pycapsule.DLPack; its Python helper declares their ctypes
// signatures and frees its ids with pybridges_free. exports_test.go
// checks both sides: each file's prefix, and that the helpers call every
// exported function and nothing else. A bridge that needs more set-up
// than pybridges_init has its own init function, called only by its own
// helper (dlonnx_init loads ONNX Runtime, dlgomlx_init makes GoMLX's
// simplego backend), so that the other bridges' tests never need what it
// loads.
package main

// #include <stdint.h>
import "C"

import (
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// The Go values Python holds, by id (ids start at 1).
var (
	mu     sync.Mutex
	values = map[int64]any{}
	nextID int64
)

func register(v any) C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	nextID++
	values[nextID] = v
	return C.int64_t(nextID)
}

// lookup returns the value of id if it is a T.
func lookup[T any](id C.int64_t) (T, bool) {
	mu.Lock()
	defer mu.Unlock()
	v, ok := values[int64(id)].(T)
	return v, ok
}

//export pybridges_init
func pybridges_init() C.int {
	if pycapsule.Init() != nil {
		return -1
	}
	return 0
}

// pybridges_free drops id and releases what it holds (Release, Close or,
// for ONNX Runtime sessions, Destroy, whichever the value has); exports
// of it keep their own references.
//
//export pybridges_free
func pybridges_free(id C.int64_t) {
	mu.Lock()
	v := values[int64(id)]
	delete(values, int64(id))
	mu.Unlock()
	switch v := v.(type) {
	case interface{ Release() }:
		v.Release()
	case io.Closer:
		v.Close()
	case interface{ Destroy() error }:
		v.Destroy()
	}
}

// pybridges_live is the number of ids not yet freed.
//
//export pybridges_live
func pybridges_live() C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	return C.int64_t(len(values))
}

// pybridges_outstanding is dlpack.Outstanding: exports not yet released.
//
//export pybridges_outstanding
func pybridges_outstanding() C.int64_t { return C.int64_t(dlpack.Outstanding()) }

// pybridges_collect runs Go's garbage collector and gives the cleanups of
// unreachable values (which release the tensors they took over) a moment
// to run.
//
//export pybridges_collect
func pybridges_collect() {
	runtime.GC()
	time.Sleep(5 * time.Millisecond)
}

// pybridges_go_heap runs a GC and returns the Go heap in use, in bytes.
//
//export pybridges_go_heap
func pybridges_go_heap() C.int64_t {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return C.int64_t(ms.HeapAlloc)
}

func main() {}
