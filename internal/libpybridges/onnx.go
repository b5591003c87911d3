package main

// ONNX Runtime of package dlonnx: models run from Go on tensors Python
// hands over by DLPack, the results handed back the same way
// (examples/onnx/goort.py; its tests compare them with onnxruntime's
// Python API). Inputs are shared with ONNX Runtime when they are compact
// and writable, else copied (dlonnx.CopyToValue); outputs are written by
// ONNX Runtime into memory that the consumer then reads without a copy:
// memory made by Go (dlonnx_run, dlonnx.NewOutput), or memory ONNX Runtime
// allocated itself in whatever shape the data gave (dlonnx_run_adopt,
// dlonnx.Session). ONNX Runtime is loaded only by dlonnx_init: the other
// bridges' tests never load it.

// #include <stdint.h>
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/pycapsule"
	ort "github.com/yalue/onnxruntime_go"
)

// The sessions are in the registry: *ort.DynamicAdvancedSession
// (dlonnx_open; outputs made by Go) and *dlonnx.Session
// (dlonnx_open_adopting; outputs left to ONNX Runtime and adopted).
// pybridges_free destroys them.
var (
	// What the last run saw, for the zero-copy checks: the address of
	// each input's memory as ONNX Runtime has it, whether it was copied,
	// and the address of the output's memory.
	onnxLastInputs []uintptr
	onnxLastCopied []bool
	onnxLastOutput uintptr
	// Whether the last output equalled, bit for bit, the expected tensor
	// handed to the run (-1: none was).
	onnxLastEqual = -1
)

// onnxFail sets a Python exception (BufferError if bufferError, else
// ValueError) whose message starts "goort: ", the name of the Python helper.
func onnxFail(bufferError bool, err error) {
	pycapsule.SetError(bufferError, "goort: "+err.Error())
}

// dlonnx_init loads ONNX Runtime from lib (once; later calls do
// nothing), after pybridges_init. Returns 0, or -1 with a Python
// exception set.
//
//export dlonnx_init
func dlonnx_init(lib *C.char) C.int {
	if ort.IsInitialized() {
		return 0
	}
	ort.SetSharedLibraryPath(C.GoString(lib))
	if err := ort.InitializeEnvironment(); err != nil {
		onnxFail(false, err)
		return -1
	}
	return 0
}

// dlonnx_open opens a model whose inputs are named in the comma-separated
// list inputs and whose single output is named output. Returns the
// session's id, or -1 with a Python exception set.
//
//export dlonnx_open
func dlonnx_open(model, inputs, output *C.char) C.int64_t {
	// From the model's bytes: onnxruntime_go v1.27.0 leaks the C copy of
	// a path it opens.
	data, err := os.ReadFile(C.GoString(model))
	if err != nil {
		onnxFail(false, err)
		return -1
	}
	s, err := ort.NewDynamicAdvancedSessionWithONNXData(data, strings.Split(C.GoString(inputs), ","),
		[]string{C.GoString(output)}, nil)
	if err != nil {
		onnxFail(false, err)
		return -1
	}
	return register(s)
}

// dlonnx_open_adopting opens a model as a dlonnx Session, whose outputs
// ONNX Runtime allocates (any shape the data gives). Returns the
// session's id, or -1 with a Python exception set.
//
//export dlonnx_open_adopting
func dlonnx_open_adopting(model *C.char) C.int64_t {
	data, err := os.ReadFile(C.GoString(model))
	if err != nil {
		onnxFail(false, err)
		return -1
	}
	s, err := dlonnx.NewSession(data)
	if err != nil {
		onnxFail(false, err)
		return -1
	}
	return register(s)
}

// dlonnx_run_adopt consumes n DLPack capsules (one per input, as
// dlonnx_run), runs a session of dlonnx_open_adopting and returns a new
// versioned DLPack capsule of output i over the memory ONNX Runtime
// allocated for it (no copy); or 0 with a Python exception set. The other
// outputs are released.
//
//export dlonnx_run_adopt
func dlonnx_run_adopt(id C.int64_t, caps *C.uintptr_t, n C.int, i C.int) C.uintptr_t {
	s, ok := lookup[*dlonnx.Session](id)
	if !ok {
		onnxFail(false, errors.New("no such session"))
		return 0
	}
	capsules := unsafe.Slice((*uintptr)(unsafe.Pointer(caps)), int(n))
	inputs := make([]*dlonnx.Tensor, 0, len(capsules))
	defer func() {
		for _, v := range inputs {
			v.Destroy()
		}
	}()
	for j, c := range capsules {
		t, err := onnxInput(c)
		if err != nil {
			onnxFail(true, fmt.Errorf("input %d: %w", j, err))
			return 0
		}
		inputs = append(inputs, t)
	}
	outs, err := s.Run(inputs...)
	if err != nil {
		onnxFail(false, err)
		return 0
	}
	defer func() {
		for _, o := range outs {
			o.Destroy() // the capsule's consumer holds its own share
		}
	}()
	if int(i) < 0 || int(i) >= len(outs) {
		onnxFail(false, fmt.Errorf("no output %d", i))
		return 0
	}
	onnxLastOutput = 0
	if b := outs[i].Bytes(); len(b) > 0 {
		onnxLastOutput = uintptr(unsafe.Pointer(&b[0]))
	}
	m, err := dlpack.Produce(outs[i], dlpack.Request{})
	if err != nil {
		onnxFail(true, err)
		return 0
	}
	capsule := pycapsule.New(m.Pointer(), m.Versioned != nil)
	if capsule == 0 {
		m.Close()
	}
	return C.uintptr_t(capsule)
}

// dlonnx_run consumes n DLPack capsules (borrowed references to unconsumed
// capsules, one per input), runs the session, and returns a new versioned
// DLPack capsule of the output, of data type dtype ("float32") and the
// given shape; or 0 with a Python exception set. Each input tensor is
// released when the run is over, the output when its consumer lets go.
// If expect is not 0, it is one more capsule, of the output ONNX Runtime's
// Python API computed: Go compares the two bit for bit (dlonnx_last_equal).
//
//export dlonnx_run
func dlonnx_run(id C.int64_t, caps *C.uintptr_t, n C.int, dtype *C.char, shape *C.int64_t, ndim C.int, expect C.uintptr_t) C.uintptr_t {
	s, ok := lookup[*ort.DynamicAdvancedSession](id)
	if !ok {
		onnxFail(false, errors.New("no such session"))
		return 0
	}
	dt, err := dlpack.ParseDataType(C.GoString(dtype))
	if err != nil {
		onnxFail(false, err)
		return 0
	}
	capsules := unsafe.Slice((*uintptr)(unsafe.Pointer(caps)), int(n))
	inputs := make([]ort.Value, 0, len(capsules))
	defer func() {
		for _, v := range inputs {
			v.Destroy()
		}
	}()
	onnxLastInputs, onnxLastCopied = onnxLastInputs[:0], onnxLastCopied[:0]
	for i, c := range capsules {
		t, err := onnxInput(c)
		if err != nil {
			onnxFail(true, fmt.Errorf("input %d: %w", i, err))
			// The capsules after this one stay unconsumed: Python
			// releases them.
			return 0
		}
		inputs = append(inputs, t)
		onnxLastInputs = append(onnxLastInputs, onnxDataAddr(t))
		onnxLastCopied = append(onnxLastCopied, t.Copied())
	}
	out, err := dlonnx.NewOutput(dt, unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(ndim)))
	if err != nil {
		onnxFail(false, err)
		return 0
	}
	defer out.Destroy() // the capsule's consumer holds its own share
	if err := s.Run(inputs, []ort.Value{out}); err != nil {
		onnxFail(false, err)
		return 0
	}
	onnxLastOutput = onnxDataAddr(out)
	onnxLastEqual = -1
	if expect != 0 {
		eq, err := onnxSameBytes(uintptr(expect), out)
		if err != nil {
			onnxFail(true, fmt.Errorf("expected output: %w", err))
			return 0
		}
		onnxLastEqual = 0
		if eq {
			onnxLastEqual = 1
		}
	}
	m, err := dlpack.Produce(out, dlpack.Request{})
	if err != nil {
		onnxFail(true, err)
		return 0
	}
	capsule := pycapsule.New(m.Pointer(), m.Versioned != nil)
	if capsule == 0 { // Python set the error; the tensor is still ours
		m.Close()
	}
	return C.uintptr_t(capsule)
}

// onnxInput takes the tensor out of a capsule and makes the ONNX Runtime
// tensor over it: shared when it can be, else an explicit copy. The
// Foreign is closed at once: the Tensor holds its own reference.
func onnxInput(capsule uintptr) (*dlonnx.Tensor, error) {
	p, versioned, err := pycapsule.Consume(capsule)
	if err != nil {
		return nil, err
	}
	var f dlpack.Foreign
	if versioned {
		f, err = dlpack.Import(p)
	} else {
		f, err = dlpack.ImportLegacy(p, dlpack.AssumeWritable())
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := dlonnx.ToValue(f)
	if errors.Is(err, dlpack.ErrReadOnly) || errors.Is(err, dlpack.ErrLayout) {
		t, err = dlonnx.CopyToValue(f)
	}
	return t, err
}

// onnxSameBytes reports whether the tensor in a capsule has the type, shape
// and bytes of out.
func onnxSameBytes(capsule uintptr, out *dlonnx.Tensor) (bool, error) {
	p, versioned, err := pycapsule.Consume(capsule)
	if err != nil {
		return false, err
	}
	var want dlpack.Foreign
	if versioned {
		want, err = dlpack.Import(p)
	} else {
		want, err = dlpack.ImportLegacy(p)
	}
	if err != nil {
		return false, err
	}
	defer want.Close()
	// A compact copy of any layout, read as bytes.
	w, err := dlonnx.CopyToValue(want)
	if err != nil {
		return false, err
	}
	defer w.Destroy()
	return w.DType() == out.DType() && slices.Equal(w.Shape(), out.Shape()) && bytes.Equal(w.GetData(), out.GetData()), nil
}

func onnxDataAddr(t *dlonnx.Tensor) uintptr {
	if b := t.GetData(); len(b) > 0 {
		return uintptr(unsafe.Pointer(&b[0]))
	}
	return 0
}

// dlonnx_input_addr returns the address of input i's memory as ONNX
// Runtime had it in the last dlonnx_run (0 if there was no input i).
//
//export dlonnx_input_addr
func dlonnx_input_addr(i C.int) C.uintptr_t {
	if i < 0 || int(i) >= len(onnxLastInputs) {
		return 0
	}
	return C.uintptr_t(onnxLastInputs[i])
}

// dlonnx_input_copied reports whether input i of the last dlonnx_run was
// copied (1) or shared (0).
//
//export dlonnx_input_copied
func dlonnx_input_copied(i C.int) C.int {
	if i >= 0 && int(i) < len(onnxLastCopied) && onnxLastCopied[i] {
		return 1
	}
	return 0
}

// dlonnx_last_equal reports whether the last run's output equalled the
// expected tensor bit for bit: 1 yes, 0 no, -1 none was given.
//
//export dlonnx_last_equal
func dlonnx_last_equal() C.int { return C.int(onnxLastEqual) }

// dlonnx_output_addr returns the address of the memory ONNX Runtime wrote
// the last output into.
//
//export dlonnx_output_addr
func dlonnx_output_addr() C.uintptr_t { return C.uintptr_t(onnxLastOutput) }
