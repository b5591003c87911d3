//go:build cgo

package dlonnx

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Session is an ONNX Runtime inference session driven through ONNX
// Runtime's C API by this package, so that it can leave outputs to ONNX
// Runtime and hand them on without a copy (Run), check inputs against
// the model before running (CheckInputs) and tell the output shapes in
// advance (OutputShapes). It runs on the library onnxruntime_go loaded
// and holds its own reference to the process's ONNX Runtime environment
// and to the library, so it outlives ort.DestroyEnvironment.
//
// A Session may run from several goroutines at once, as ONNX Runtime
// allows; Destroy waits for the runs in progress to return (it used to
// free the session under them), and a run after it fails with
// dlpack.ErrClosed.
type Session struct {
	s       *sessState
	inputs  []Info
	outputs []Info
	inNames cNames
	outName cNames
}

type sessState struct {
	env, session unsafe.Pointer
	names        []cNames
	done         atomic.Bool
	mu           sync.RWMutex // runs hold it shared, release exclusively
	cleanup      runtime.Cleanup
}

// NewSession opens a model from its bytes. The model's inputs and
// outputs must be tensors. It fails with ErrNotLoaded before
// ort.InitializeEnvironment, and with ErrRuntime for a model ONNX Runtime
// refuses.
func NewSession(model []byte) (*Session, error) {
	if err := acquire(); err != nil {
		return nil, err
	}
	env, sess, err := newSession(model, 0)
	if err != nil {
		releaseLib()
		return nil, err
	}
	st := &sessState{env: env, session: sess}
	s := &Session{s: st}
	err = s.readInfo()
	if err != nil {
		st.release()
		return nil, err
	}
	names := func(is []Info) []string {
		out := make([]string, len(is))
		for i, x := range is {
			out[i] = x.Name
		}
		return out
	}
	s.inNames, s.outName = newCNames(names(s.inputs)), newCNames(names(s.outputs))
	st.names = []cNames{s.inNames, s.outName}
	st.cleanup = runtime.AddCleanup(s, (*sessState).release, st)
	return s, nil
}

func (s *Session) readInfo() error {
	nin, nout, err := sessionCounts(s.s.session)
	if err != nil {
		return err
	}
	for _, side := range []struct {
		n      int
		output bool
		into   *[]Info
	}{{nin, false, &s.inputs}, {nout, true, &s.outputs}} {
		for i := 0; i < side.n; i++ {
			info, onnxType, err := ioInfo(s.s.session, side.output, i)
			if err != nil {
				return err
			}
			if onnxType != 1 {
				return fmt.Errorf("dlonnx: %q is not a tensor (ONNXType %d): %w", info.Name, onnxType, dlpack.ErrDataType)
			}
			dt, ok := ortTypes[info.elem]
			if !ok {
				return fmt.Errorf("dlonnx: %q has ONNX Runtime element type %d, which DLPack lacks: %w", info.Name, info.elem, dlpack.ErrDataType)
			}
			info.DType = dt
			*side.into = append(*side.into, info)
		}
	}
	return nil
}

func (st *sessState) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.done.CompareAndSwap(false, true) {
		return
	}
	releaseSession(st.env, st.session)
	for _, n := range st.names {
		n.free()
	}
	releaseLib()
}

// Destroy releases the session (and its references to the environment
// and the library), once the runs in progress have returned. Outputs of
// its runs live on. Idempotent; returns nil.
func (s *Session) Destroy() error {
	s.s.cleanup.Stop()
	s.s.release()
	return nil
}

// Close is Destroy: the name every owner of this library has for
// releasing what it owns (Destroy is the name onnxruntime_go's values use).
func (s *Session) Close() error { return s.Destroy() }

// Inputs describes the model's inputs, in the order Run takes them.
func (s *Session) Inputs() []Info { return cloneInfos(s.inputs) }

// Outputs describes the model's outputs, in the order Run returns them.
func (s *Session) Outputs() []Info { return cloneInfos(s.outputs) }

func cloneInfos(is []Info) []Info {
	out := slices.Clone(is)
	for i := range out {
		out[i].Shape, out[i].Dims = slices.Clone(out[i].Shape), slices.Clone(out[i].Dims)
	}
	return out
}

// CheckInputs checks inputs (in the order of Inputs) against the model
// before anything runs: their number, and for each its element type, its
// rank, every static dimension, and every named dimension equal wherever
// the name appears across the inputs. Errors are *InputError (wrapping
// ErrInput and dlpack.ErrDataType, ErrNDim or ErrShape), naming the input
// and dimension. Run and RunInto call it first.
func (s *Session) CheckInputs(inputs ...*Tensor) error {
	var buf [8]binding
	_, err := s.bind(inputs, buf[:0])
	return err
}

// binding is the value a named dimension takes, and where it was first
// seen.
type binding struct {
	name    string
	value   int64
	in, dim int
}

func lookup(bs []binding, name string) (binding, bool) {
	for _, b := range bs {
		if b.name == name {
			return b, true
		}
	}
	return binding{}, false
}

// bind checks the inputs and appends the value of each named dimension
// to bound.
func (s *Session) bind(inputs []*Tensor, bound []binding) ([]binding, error) {
	if len(inputs) != len(s.inputs) {
		return nil, &InputError{Input: fmt.Sprintf("#%d", len(inputs)), Dim: -1, Want: fmt.Sprintf("%d inputs", len(s.inputs)),
			Got: fmt.Sprintf("%d inputs", len(inputs)), Err: dlpack.ErrShape}
	}
	for i, in := range s.inputs {
		t := inputs[i]
		if t == nil {
			return nil, &InputError{Input: in.Name, Dim: -1, Want: in.DType, Got: "nil", Err: dlpack.ErrNilPointer}
		}
		if t.s.dtype != in.DType {
			return nil, &InputError{Input: in.Name, Dim: -1, Want: in.DType, Got: t.s.dtype, Err: dlpack.ErrDataType}
		}
		shape := t.s.shape
		if len(shape) != len(in.Shape) {
			return nil, &InputError{Input: in.Name, Dim: -1, Want: fmt.Sprintf("rank %d %v", len(in.Shape), in.Shape),
				Got: fmt.Sprintf("rank %d %v", len(shape), shape), Err: dlpack.ErrNDim}
		}
		for d, want := range in.Shape {
			got := shape[d]
			if want >= 0 && got != want {
				return nil, &InputError{Input: in.Name, Dim: d, Want: want, Got: got, Err: dlpack.ErrShape}
			}
			name := in.Dims[d]
			if want >= 0 || name == "" {
				continue
			}
			if b, ok := lookup(bound, name); !ok {
				bound = append(bound, binding{name, got, i, d})
			} else if b.value != got {
				return nil, &InputError{Input: in.Name, Dim: d, Want: b.value, Got: got, Err: dlpack.ErrShape,
					Why: fmt.Sprintf("dimension %q is %d in input %q dimension %d", name, b.value, s.inputs[b.in].Name, b.dim)}
			}
		}
	}
	return bound, nil
}

// OutputShapes returns the shape of each output (in the order of
// Outputs) that the model's shape information gives for these inputs:
// static dimensions, and named ones bound by the inputs; -1 where the
// model leaves a dimension to the data (NonZero, TopK with a runtime k,
// Reshape to a runtime shape...) or names it after no input. Outputs
// with no -1 can be made with NewOutput and run with RunInto. The
// inputs are checked as CheckInputs does.
func (s *Session) OutputShapes(inputs ...*Tensor) ([][]int64, error) {
	var buf [8]binding
	bound, err := s.bind(inputs, buf[:0])
	if err != nil {
		return nil, err
	}
	out := make([][]int64, len(s.outputs))
	for i, o := range s.outputs {
		shape := slices.Clone(o.Shape)
		for d, v := range shape {
			if v >= 0 {
				continue
			}
			if b, ok := lookup(bound, o.Dims[d]); ok && o.Dims[d] != "" {
				shape[d] = b.value
			}
		}
		out[i] = shape
	}
	return out, nil
}

// Run runs the model on inputs (in the order of Inputs) and returns every
// output (in the order of Outputs) as ONNX Runtime allocated it, adopted
// without a copy (see FromValue): any shape the data gives and any type.
// ONNX Runtime allocates from its session arena, so a loop of runs reuses
// its memory with nothing zeroed or copied. The inputs are checked first
// (CheckInputs); they must stay alive (not destroyed) until Run returns.
func (s *Session) Run(inputs ...*Tensor) ([]*Output, error) {
	if err := s.CheckInputs(inputs...); err != nil {
		return nil, err
	}
	outs := make([]unsafe.Pointer, len(s.outputs))
	if err := s.run(inputs, outs); err != nil {
		return nil, err
	}
	result := make([]*Output, len(outs))
	var first error
	for i, v := range outs {
		if v == nil {
			continue
		}
		addRef() // the session holds one, so the library is open
		o, err := adopt(v)
		if err != nil {
			releaseRawValue(v)
			releaseLib()
			if first == nil {
				first = fmt.Errorf("dlonnx: output %q: %w", s.outputs[i].Name, err)
			}
			continue
		}
		result[i] = o
	}
	if first != nil {
		for _, o := range result {
			if o != nil {
				o.Destroy()
			}
		}
		return nil, first
	}
	return result, nil
}

// RunInto runs the model on inputs into outputs made by the caller (in
// the order of Outputs; NewOutput with the shapes of OutputShapes, or a
// Tensor of a Pool): ONNX Runtime writes into their memory. ONNX Runtime
// checks that each output has exactly the shape it produces.
func (s *Session) RunInto(inputs []*Tensor, outputs []*Tensor) error {
	if err := s.CheckInputs(inputs...); err != nil {
		return err
	}
	if len(outputs) != len(s.outputs) {
		return fmt.Errorf("dlonnx: RunInto: %d outputs for a model with %d: %w", len(outputs), len(s.outputs), dlpack.ErrShape)
	}
	outs := make([]unsafe.Pointer, len(outputs))
	for i, t := range outputs {
		if t == nil {
			return fmt.Errorf("dlonnx: RunInto: output %q: %w", s.outputs[i].Name, dlpack.ErrNilPointer)
		}
		if outs[i] = t.raw(); outs[i] == nil {
			// a nil entry asks ONNX Runtime to allocate the output, which
			// nobody would release: a destroyed output is refused
			return fmt.Errorf("dlonnx: RunInto: output %q is destroyed: %w", s.outputs[i].Name, dlpack.ErrClosed)
		}
	}
	return s.run(inputs, outs)
}

func (s *Session) run(inputs []*Tensor, outs []unsafe.Pointer) error {
	s.s.mu.RLock()
	defer s.s.mu.RUnlock()
	if s.s.done.Load() {
		return fmt.Errorf("dlonnx: Run on a destroyed Session: %w", dlpack.ErrClosed)
	}
	ins := make([]unsafe.Pointer, len(inputs))
	for i, t := range inputs {
		ins[i] = t.raw()
		if ins[i] == nil {
			return &InputError{Input: s.inputs[i].Name, Dim: -1, Want: "a live Tensor", Got: "a destroyed one", Err: dlpack.ErrClosed}
		}
	}
	var ip, op unsafe.Pointer
	if len(ins) > 0 {
		ip = unsafe.Pointer(&ins[0])
	}
	if len(outs) > 0 {
		op = unsafe.Pointer(&outs[0])
	}
	err := run(s.s.session, s.inNames, ip, len(ins), s.outName, op, len(outs))
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(s)
	return err
}
