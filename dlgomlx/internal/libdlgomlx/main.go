// Command libdlgomlx is a C shared library that lets the Python test of
// package dlgomlx run a GoMLX model on weights from a safetensors file and
// take its results with numpy.from_dlpack, side by side with JAX:
//
//	go build -buildmode=c-shared -o libdlgomlx.so ./dlgomlx/internal/libdlgomlx
//
// dlgomlx/testdata/mlp.py loads it with ctypes.PyDLL (every call holds
// the GIL).
package main

// #include <stdint.h>
import "C"

import (
	"reflect"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/tensorfile"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

var (
	backend backends.Backend
	results []*tensors.Tensor
)

//export gm_init
func gm_init() C.int {
	if pycapsule.Init() != nil {
		return -1
	}
	b, err := simplego.New("")
	if err != nil {
		return -1
	}
	backend = b
	return 0
}

// mlp is the model: softmax(relu(x·w1 + b1)·w2 + b2) over the last axis;
// with it, exact results: xi*3 + 7 (int32) and the transpose of w1.
func mlp(x, w1, b1, w2, b2, xi *graph.Node) (probs, ints, w1t *graph.Node) {
	h := graph.MaxScalar(graph.Add(graph.MatMul(x, w1), graph.InsertAxes(b1, 0)), 0)
	probs = graph.Softmax(graph.Add(graph.MatMul(h, w2), graph.InsertAxes(b2, 0)), -1)
	ints = graph.AddScalar(graph.MulScalar(xi, 3), 7)
	return probs, ints, graph.Transpose(w1, 0, 1)
}

// gm_mlp opens the safetensors file at path (tensors x, w1, b1, w2, b2,
// xi), hands them to GoMLX through the bridge, runs the model on simplego
// and keeps its three results; it returns the number of copies the
// bridge made, or -1 with a ValueError set.
//
//export gm_mlp
func gm_mlp(path *C.char) C.int64_t {
	fail := func(err error) C.int64_t {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	f, err := tensorfile.OpenSafetensors(C.GoString(path))
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	before := dlgomlx.ReadStats().Copies
	var in []any
	for _, name := range []string{"x", "w1", "b1", "w2", "b2", "xi"} {
		t, err := f.Tensor(name)
		if err != nil {
			return fail(err)
		}
		g, err := dlgomlx.ToTensor(t, backend)
		if err != nil {
			return fail(err)
		}
		in = append(in, g)
	}
	copies := dlgomlx.ReadStats().Copies - before
	exec, err := graph.NewExec(backend, mlp)
	if err != nil {
		return fail(err)
	}
	results, err = exec.Exec(in...)
	if err != nil {
		return fail(err)
	}
	for _, t := range in {
		t.(*tensors.Tensor).MustFinalizeAll()
	}
	return C.int64_t(copies)
}

// gm_dlpack is __dlpack__ for result i: the four arguments are the Python
// objects __dlpack__ received (borrowed). It returns a new capsule
// reference, or 0 with the exception set.
//
//export gm_dlpack
func gm_dlpack(i C.int, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	if int(i) >= len(results) {
		pycapsule.SetError(true, "libdlgomlx: no such result")
		return 0
	}
	e, err := dlgomlx.FromTensor(results[i])
	if err != nil {
		pycapsule.Raise(err)
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(e, uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// gm_addr returns the address of result i's elements in GoMLX.
//
//export gm_addr
func gm_addr(i C.int) C.uintptr_t {
	var a uintptr
	_ = results[i].ConstFlatData(func(flat any) { a = uintptr(reflect.ValueOf(flat).UnsafePointer()) })
	return C.uintptr_t(a)
}

// gm_exports returns dlgomlx.Exports of result i.
//
//export gm_exports
func gm_exports(i C.int) C.int64_t { return C.int64_t(dlgomlx.Exports(results[i])) }

// gm_take takes a Python object with __dlpack__ into a GoMLX tensor on
// simplego and finalizes it: one exchange from Python into GoMLX. It
// returns 0, or -1 with the exception set.
//
//export gm_take
func gm_take(obj C.uintptr_t) C.int {
	f, err := pycapsule.Import(uintptr(obj))
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	t, err := dlgomlx.ToTensor(f, backend)
	f.Close()
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	t.MustFinalizeAll()
	return 0
}

// gm_put takes a Python object with __dlpack__ into a GoMLX tensor on
// simplego and keeps it as the next result; it returns its index, or -1
// with the exception set.
//
//export gm_put
func gm_put(obj C.uintptr_t) C.int {
	f, err := pycapsule.Import(uintptr(obj))
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	t, err := dlgomlx.ToTensor(f, backend)
	f.Close()
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	results = append(results, t)
	return C.int(len(results) - 1)
}

// gm_stats stores the bridge's counters.
//
//export gm_stats
func gm_stats(shared, copies, bytes *C.int64_t) {
	s := dlgomlx.ReadStats()
	*shared, *copies, *bytes = C.int64_t(s.Shared), C.int64_t(s.Copies), C.int64_t(s.CopiedBytes)
}

// gm_free finalizes the results, each once its last consumer is done.
//
//export gm_free
func gm_free() {
	for _, t := range results {
		_ = dlgomlx.FinalizeAll(t)
	}
	results = nil
}

// gm_outstanding returns dlpack.Outstanding().
//
//export gm_outstanding
func gm_outstanding() C.int64_t { return C.int64_t(dlpack.Outstanding()) }

func main() {}
