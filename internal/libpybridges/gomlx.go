package main

// The GoMLX tensors of package dlgomlx: a GoMLX model run on simplego on
// weights from a safetensors file, its results taken with
// numpy.from_dlpack side by side with JAX, and NumPy arrays exchanged
// with GoMLX each way (dlgomlx/testdata/mlp.py, run by the dlgomlx
// test TestNumPyAndJAXSideBySide). The simplego backend is made only by
// dlgomlx_init.

// #include <stdint.h>
import "C"

import (
	"reflect"

	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/tensorfile"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

var (
	gomlxBackend backends.Backend
	// The tensors Python refers to by index: the model's results, then
	// each tensor of dlgomlx_put.
	gomlxResults []*tensors.Tensor
)

// dlgomlx_init makes the simplego backend (once), after pybridges_init.
// Returns 0, or -1 with a ValueError set.
//
//export dlgomlx_init
func dlgomlx_init() C.int {
	if gomlxBackend != nil {
		return 0
	}
	b, err := simplego.New("")
	if err != nil {
		pycapsule.SetError(false, "dlgomlx: "+err.Error())
		return -1
	}
	gomlxBackend = b
	return 0
}

// gomlxReady reports whether dlgomlx_init made the backend, and sets a
// ValueError if not.
func gomlxReady() bool {
	if gomlxBackend == nil {
		pycapsule.SetError(false, "dlgomlx: dlgomlx_init was not called")
		return false
	}
	return true
}

// gomlxResult returns result i, or nil with a BufferError set.
func gomlxResult(i C.int) *tensors.Tensor {
	if i < 0 || int(i) >= len(gomlxResults) {
		pycapsule.SetError(true, "dlgomlx: no such result")
		return nil
	}
	return gomlxResults[i]
}

// gomlxMLP is the model: softmax(relu(x·w1 + b1)·w2 + b2) over the last axis;
// with it, exact results: xi*3 + 7 (int32) and the transpose of w1.
func gomlxMLP(x, w1, b1, w2, b2, xi *graph.Node) (probs, ints, w1t *graph.Node) {
	h := graph.MaxScalar(graph.Add(graph.MatMul(x, w1), graph.InsertAxes(b1, 0)), 0)
	probs = graph.Softmax(graph.Add(graph.MatMul(h, w2), graph.InsertAxes(b2, 0)), -1)
	ints = graph.AddScalar(graph.MulScalar(xi, 3), 7)
	return probs, ints, graph.Transpose(w1, 0, 1)
}

// dlgomlx_mlp opens the safetensors file at path (tensors x, w1, b1, w2, b2,
// xi), hands them to GoMLX through the bridge, runs the model on simplego
// and keeps its three results; it returns the number of copies the
// bridge made, or -1 with a ValueError set.
//
//export dlgomlx_mlp
func dlgomlx_mlp(path *C.char) C.int64_t {
	if !gomlxReady() {
		return -1
	}
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
		g, err := dlgomlx.ToTensor(t, gomlxBackend)
		if err != nil {
			return fail(err)
		}
		in = append(in, g)
	}
	copies := dlgomlx.ReadStats().Copies - before
	exec, err := graph.NewExec(gomlxBackend, gomlxMLP)
	if err != nil {
		return fail(err)
	}
	gomlxResults, err = exec.Exec(in...)
	if err != nil {
		return fail(err)
	}
	for _, t := range in {
		t.(*tensors.Tensor).MustFinalizeAll()
	}
	return C.int64_t(copies)
}

// dlgomlx_dlpack is __dlpack__ for result i: the four arguments are the Python
// objects __dlpack__ received (borrowed). It returns a new capsule
// reference, or 0 with the exception set.
//
//export dlgomlx_dlpack
func dlgomlx_dlpack(i C.int, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	r := gomlxResult(i)
	if r == nil {
		return 0
	}
	e, err := dlgomlx.FromTensor(r)
	if err != nil {
		pycapsule.Raise(err)
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(e, uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// dlgomlx_addr returns the address of result i's elements in GoMLX, or 0
// with a BufferError set.
//
//export dlgomlx_addr
func dlgomlx_addr(i C.int) C.uintptr_t {
	r := gomlxResult(i)
	if r == nil {
		return 0
	}
	var a uintptr
	_ = r.ConstFlatData(func(flat any) { a = uintptr(reflect.ValueOf(flat).UnsafePointer()) })
	return C.uintptr_t(a)
}

// dlgomlx_exports returns dlgomlx.Exports of result i, or -1 with a
// BufferError set.
//
//export dlgomlx_exports
func dlgomlx_exports(i C.int) C.int64_t {
	r := gomlxResult(i)
	if r == nil {
		return -1
	}
	return C.int64_t(dlgomlx.Exports(r))
}

// dlgomlx_take takes a Python object with __dlpack__ into a GoMLX tensor on
// simplego and finalizes it: one exchange from Python into GoMLX. It
// returns 0, or -1 with the exception set.
//
//export dlgomlx_take
func dlgomlx_take(obj C.uintptr_t) C.int {
	t := gomlxImport(obj)
	if t == nil {
		return -1
	}
	t.MustFinalizeAll()
	return 0
}

// dlgomlx_put takes a Python object with __dlpack__ into a GoMLX tensor on
// simplego and keeps it as the next result; it returns its index, or -1
// with the exception set.
//
//export dlgomlx_put
func dlgomlx_put(obj C.uintptr_t) C.int {
	t := gomlxImport(obj)
	if t == nil {
		return -1
	}
	gomlxResults = append(gomlxResults, t)
	return C.int(len(gomlxResults) - 1)
}

// dlgomlx_stats stores the bridge's counters.
//
//export dlgomlx_stats
func dlgomlx_stats(shared, copies, bytes *C.int64_t) {
	s := dlgomlx.ReadStats()
	*shared, *copies, *bytes = C.int64_t(s.Shared), C.int64_t(s.Copies), C.int64_t(s.CopiedBytes)
}

// dlgomlx_free finalizes the results, each once its last consumer is
// done.
//
//export dlgomlx_free
func dlgomlx_free() {
	for _, t := range gomlxResults {
		_ = dlgomlx.FinalizeAll(t)
	}
	gomlxResults = nil
}

// gomlxImport takes a Python object with __dlpack__ into a GoMLX tensor on
// simplego (dlgomlx.ToTensor), or returns nil with the exception set.
func gomlxImport(obj C.uintptr_t) *tensors.Tensor {
	if !gomlxReady() {
		return nil
	}
	f, err := pycapsule.Import(uintptr(obj))
	if err != nil {
		pycapsule.Raise(err)
		return nil
	}
	t, err := dlgomlx.ToTensor(f, gomlxBackend)
	f.Close()
	if err != nil {
		pycapsule.Raise(err)
		return nil
	}
	return t
}
