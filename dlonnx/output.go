//go:build cgo

package dlonnx

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// maxRank bounds the rank of the values read here (ONNX Runtime has no
// limit; DLPack consumers rarely go past 8).
const maxRank = 64

// ortTypes maps ONNX Runtime's element types to DLPack's: every type both
// have, the fnuz float8 types included (the sub-byte int4, uint4, float4
// and int2 types are packed two or four to a byte, which a DLPack dtype
// does not describe here; strings are not numbers; the complex types are
// in the enum, but ONNX Runtime 1.24 registers no tensor of them).
var ortTypes = func() map[int]dlpack.DataType {
	m := map[int]dlpack.DataType{18: dlpack.Float8E4M3FNUZ, 20: dlpack.Float8E5M2FNUZ}
	for dt, k := range kinds {
		m[int(k.ort)] = dt
	}
	return m
}()

// Output is a tensor ONNX Runtime allocated itself (an output a Session
// left to it), adopted without a copy: a dlpack.Source and
// dlpack.Producer over ONNX Runtime's own memory, its type and shape read
// from the value.
//
// The Output owns the ONNX Runtime value: Destroy gives up the Go owner's
// share and each DLPack consumer holds one until it releases the tensor;
// the last of them releases the value, exactly once, in whatever order
// they come and whenever that is, after the session, the Output and
// ort.DestroyEnvironment included (the value holds a reference to the
// library, see the package doc). An Output nobody destroyed is released
// by a cleanup once unreachable and no consumer holds it.
type Output struct {
	s *outState
}

type outState struct {
	refs    atomic.Int64 // the Go owner (until Destroy) + one per consumer
	owned   atomic.Bool
	value   unsafe.Pointer // the OrtValue*
	data    unsafe.Pointer
	nbytes  uintptr
	dtype   dlpack.DataType
	shape   []int64
	cleanup runtime.Cleanup
}

// FromValue adopts v, an OrtValue* made by the ONNX Runtime library that
// onnxruntime_go loaded (an output of Run left to ONNX Runtime, from C
// code of the caller's), as a DLPack producer over its memory, without a
// copy. FromValue takes ownership of v: the Output releases it once, when
// its last holder lets go, and on error it is released before FromValue
// returns, except when no ONNX Runtime library is loaded (ErrNotLoaded:
// nothing could release it). v must be a CPU tensor (sequences, maps and
// string tensors fail with dlpack.ErrDataType, as do the packed sub-byte
// types).
func FromValue(v unsafe.Pointer) (*Output, error) {
	if v == nil {
		return nil, fmt.Errorf("dlonnx: FromValue: %w", dlpack.ErrNilPointer)
	}
	if err := acquire(); err != nil {
		return nil, err
	}
	o, err := adopt(v)
	if err != nil {
		releaseRawValue(v)
		releaseLib()
	}
	return o, err
}

// adopt wraps v, whose library reference the caller holds and hands over
// on success.
func adopt(v unsafe.Pointer) (*Output, error) {
	onnxType, elem, ndim, dims, data, err := describeValue(v)
	if err != nil {
		return nil, err
	}
	if onnxType != 1 {
		return nil, &dlpack.FieldError{Field: "OrtValue type", Value: onnxType, Err: dlpack.ErrDataType,
			Why: "only tensors are adopted (ONNXType 1), not sequences, maps or optionals"}
	}
	dt, ok := ortTypes[elem]
	if !ok {
		return nil, &dlpack.FieldError{Field: "OrtValue element type", Value: elem, Err: dlpack.ErrDataType,
			Why: "no DLPack type for strings or packed sub-byte types"}
	}
	if ndim > maxRank {
		return nil, &dlpack.FieldError{Field: "OrtValue rank", Value: ndim, Err: dlpack.ErrNDim, Why: fmt.Sprintf("more than %d dimensions", maxRank)}
	}
	shape := dims
	n := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("OrtValue shape[%d]", i), Value: d, Err: dlpack.ErrShape}
		}
		n *= uint64(d)
	}
	s := &outState{value: v, data: data, nbytes: uintptr(n * uint64(dt.Bits) / 8), dtype: dt, shape: shape}
	if s.nbytes > 0 && data == nil {
		return nil, &dlpack.FieldError{Field: "OrtValue data", Value: data, Err: dlpack.ErrNullData}
	}
	s.refs.Store(1)
	s.owned.Store(true)
	o := &Output{s: s}
	s.cleanup = runtime.AddCleanup(o, (*outState).dropOwner, s)
	return o, nil
}

// Destroy gives up the Go owner's share: once no DLPack consumer holds
// the Output either, ONNX Runtime's value (and its memory) is released.
// It is idempotent and returns nil.
func (o *Output) Destroy() error {
	o.s.cleanup.Stop()
	o.s.dropOwner()
	return nil
}

// Close is Destroy: the name every owner of this library has for
// releasing what it owns (Destroy is the name onnxruntime_go's values use).
func (o *Output) Close() error { return o.Destroy() }

func (s *outState) dropOwner() {
	if s.owned.CompareAndSwap(true, false) {
		s.unref()
	}
}

func (s *outState) unref() {
	if s.refs.Add(-1) != 0 {
		return
	}
	releaseRawValue(s.value)
	releaseLib()
}

// DType returns the DLPack data type of the elements.
func (o *Output) DType() dlpack.DataType { return o.s.dtype }

// Shape returns a copy of the shape ONNX Runtime gave the value.
func (o *Output) Shape() []int64 { return append([]int64(nil), o.s.shape...) }

// Bytes returns the memory of the output (nil when empty): valid until
// the Output is destroyed (and no consumer holds it); keep the Output
// reachable while using it.
func (o *Output) Bytes() []byte {
	if o.s.nbytes == 0 || o.s.refs.Load() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(o.s.data), o.s.nbytes)
}

type outRef struct{ s *outState }

func (r outRef) ReleaseTensor() { r.s.unref() }

// DescribeTensor implements dlpack.Source: ONNX Runtime's memory, compact
// row-major on the CPU and writable. Each consumer holds a share until it
// releases the tensor; it fails with dlpack.ErrClosed once the last share
// is gone.
func (o *Output) DescribeTensor(d *dlpack.Description) error {
	s := o.s
	return describeShare(d, &s.refs, outRef{s}, s.dtype, s.shape, s.data, s.nbytes)
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (o *Output) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer with dlpack.Produce: ONNX Runtime's
// memory without a copy unless req asks for one.
func (o *Output) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(o, req) }
