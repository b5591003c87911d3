//go:build cgo

package dlonnx

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
	ort "github.com/yalue/onnxruntime_go"
)

// customData names the embedded onnxruntime_go tensor without exporting
// the field: its methods (GetData, GetShape, ...) are the Tensor's.
type customData = ort.CustomDataTensor

// Tensor is an ONNX Runtime tensor over memory described by DLPack: the
// memory of its DLPack producer (ToValue) or its own (CopyToValue,
// NewOutput). It is an ort.Value, so pass it to a session's Run as an
// input or an output; it has the methods of an *ort.CustomDataTensor
// (GetData is its memory as bytes; one byte of the bridge's own for an
// empty tensor). It is also a dlpack.Source and dlpack.Producer, so its
// memory goes on to DLPack consumers without a copy.
//
// The Tensor owns its ONNX Runtime values (onnxruntime_go's, and the one
// a Session runs with) and its reference to the memory. Destroy releases
// the values and gives up the Go owner's share of the memory; each DLPack
// consumer holds a share of the memory (not of the values) until it
// releases the tensor, and the last of them unpins Go memory and drops
// the memory reference. A Tensor is safe to hand to consumers from
// several goroutines; Run, Reshape and writes to the memory must be
// ordered by the caller, as for any onnxruntime_go value.
type Tensor struct {
	*customData
	s *state
}

// state is what the owner and the consumers share; the cleanup that
// releases an unreachable Tensor refers to it and never to the Tensor.
type state struct {
	refs     atomic.Int64 // the Go owner (until Destroy) + one per consumer
	owned    atomic.Bool  // the Go owner's share is still held
	value    *ort.CustomDataTensor
	rawv     atomic.Pointer[byte] // this package's OrtValue over the memory (Session)
	pin      runtime.Pinner
	release  func() error // drops the memory reference (Foreign or Buffer)
	data     unsafe.Pointer
	nbytes   uintptr
	empty    []byte  // the byte onnxruntime_go wants for an empty tensor
	capacity uintptr // the bytes at data (Reshape)
	dtype    dlpack.DataType
	shape    []int64
	copied   bool
	cleanup  runtime.Cleanup
}

// kind is what the bridge does with one element type.
type kind struct {
	ort ort.TensorElementDataType
	// share returns the first element of a compact CPU tensor (nil when
	// empty) and its size in bytes.
	share func(f dlpack.Foreign) (unsafe.Pointer, uintptr, error)
	// alloc makes a zeroed C buffer of the shape; release frees it.
	alloc func(shape []int64) (p unsafe.Pointer, nbytes uintptr, release func() error, err error)
	// copyTo copies the elements of f, any layout, in row-major order to dst.
	copyTo func(f dlpack.Foreign, dst unsafe.Pointer) error
}

func kindOf[T dlpack.Element](o ort.TensorElementDataType) kind {
	var z T
	size := unsafe.Sizeof(z)
	return kind{
		ort: o,
		share: func(f dlpack.Foreign) (unsafe.Pointer, uintptr, error) {
			xs, err := dlpack.Slice[T](f)
			return unsafe.Pointer(unsafe.SliceData(xs)), uintptr(len(xs)) * size, err
		},
		alloc: func(shape []int64) (unsafe.Pointer, uintptr, func() error, error) {
			b, err := dlpack.NewBuffer[T](shape)
			if err != nil {
				return nil, 0, nil, err
			}
			xs := b.Data()
			return unsafe.Pointer(unsafe.SliceData(xs)), uintptr(len(xs)) * size, b.Close, nil
		},
		copyTo: func(f dlpack.Foreign, dst unsafe.Pointer) error {
			v, err := dlpack.ViewOf[T](f)
			if err != nil {
				return err
			}
			_, err = v.CopyTo(unsafe.Slice((*T)(dst), v.Len()))
			return err
		},
	}
}

// kinds maps every DLPack type ONNX Runtime has to its element type.
var kinds = map[dlpack.DataType]kind{
	dlpack.Int8:         kindOf[int8](ort.TensorElementDataTypeInt8),
	dlpack.Int16:        kindOf[int16](ort.TensorElementDataTypeInt16),
	dlpack.Int32:        kindOf[int32](ort.TensorElementDataTypeInt32),
	dlpack.Int64:        kindOf[int64](ort.TensorElementDataTypeInt64),
	dlpack.Uint8:        kindOf[uint8](ort.TensorElementDataTypeUint8),
	dlpack.Uint16:       kindOf[uint16](ort.TensorElementDataTypeUint16),
	dlpack.Uint32:       kindOf[uint32](ort.TensorElementDataTypeUint32),
	dlpack.Uint64:       kindOf[uint64](ort.TensorElementDataTypeUint64),
	dlpack.Float16:      kindOf[minifloat.Float16](ort.TensorElementDataTypeFloat16),
	dlpack.BFloat16:     kindOf[minifloat.BFloat16](ort.TensorElementDataTypeBFloat16),
	dlpack.Float32:      kindOf[float32](ort.TensorElementDataTypeFloat),
	dlpack.Float64:      kindOf[float64](ort.TensorElementDataTypeDouble),
	dlpack.Bool:         kindOf[bool](ort.TensorElementDataTypeBool),
	dlpack.Float8E4M3FN: kindOf[minifloat.E4M3FN](ort.TensorElementDataTypeFloat8E4M3FN),
	dlpack.Float8E5M2:   kindOf[minifloat.E5M2](ort.TensorElementDataTypeFloat8E5M2),
}

// ElementType returns the ONNX Runtime element type of the DLPack type dt,
// or an error wrapping dlpack.ErrDataType if ONNX Runtime has none (or
// this package does not map it).
func ElementType(dt dlpack.DataType) (ort.TensorElementDataType, error) {
	k, err := kindFor(dt)
	return k.ort, err
}

func kindFor(dt dlpack.DataType) (kind, error) {
	k, ok := kinds[dt]
	if !ok {
		return kind{}, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: dt, Err: dlpack.ErrDataType,
			Why: "no ONNX Runtime element type (int8-64, uint8-64, float16, bfloat16, float32, float64, bool, float8_e4m3fn, float8_e5m2)"}
	}
	return k, nil
}

// checkShape refuses what onnxruntime_go cannot make over given memory.
func checkShape(shape []int64) error {
	if len(shape) == 0 {
		return &dlpack.FieldError{Field: "dl_tensor.ndim", Value: 0, Err: dlpack.ErrShape,
			Why: "onnxruntime_go makes no 0-d tensor over given memory; reshape to [1]"}
	}
	return nil
}

// ToValue makes an ONNX Runtime tensor sharing the memory of p, which
// must be a compact row-major, writable CPU tensor of a type ONNX Runtime
// has. It never copies: a read-only tensor fails with dlpack.ErrReadOnly,
// a strided one with dlpack.ErrLayout, another device with
// dlpack.ErrDevice, another type with dlpack.ErrDataType, a 0-d tensor
// with dlpack.ErrShape (use CopyToValue for the first two); before
// ort.InitializeEnvironment it fails with ErrNotLoaded.
//
// The Tensor takes its own reference to the memory (dlpack.FromRequest),
// so the caller keeps whatever it had: a Foreign passed here is still the
// caller's to Close, at any time. Go heap memory stays pinned until the
// Tensor's last release. On error nothing is held.
func ToValue(p dlpack.Producer) (*Tensor, error) {
	f, err := dlpack.FromRequest(p, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyNever, Writable: true})
	if errors.Is(err, dlpack.ErrReadOnly) {
		return nil, fmt.Errorf("dlonnx: ToValue shares writable memory only (CopyToValue copies): %w", err)
	}
	if err != nil {
		return nil, err
	}
	k, err := check(f)
	if err == nil && !f.IsContiguous() {
		err = &dlpack.FieldError{Field: "dl_tensor.strides", Value: f.Strides(), Err: dlpack.ErrLayout,
			Why: "ONNX Runtime tensors are compact row-major; CopyToValue copies"}
	}
	var data unsafe.Pointer
	var nbytes uintptr
	if err == nil {
		data, nbytes, err = k.share(f)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return newTensor(k, f.DataType(), f.Shape(), data, nbytes, f.Close, false)
}

// CopyToValue makes an ONNX Runtime tensor holding a compact copy of p, in
// a new C buffer: any strides (zero and negative included), read-only or
// not. The Tensor owns the copy; p is left as it was (a Foreign is still
// the caller's to Close). It fails like ToValue for devices, types and
// 0-d tensors.
func CopyToValue(p dlpack.Producer) (*Tensor, error) {
	f, err := dlpack.From(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := check(f)
	if err != nil {
		return nil, err
	}
	shape := f.Shape()
	data, nbytes, release, err := k.alloc(shape)
	if err != nil {
		return nil, err
	}
	if nbytes > 0 {
		if err := k.copyTo(f, data); err != nil {
			release()
			return nil, err
		}
	}
	return newTensor(k, f.DataType(), shape, data, nbytes, release, true)
}

// NewOutput makes a zeroed tensor of type dt and the given shape in a new
// 256-byte aligned C buffer, owned by the Tensor: pass it to a session's
// Run as an output and ONNX Runtime writes the result into it, where DLPack
// consumers then read it without a copy. It fails with dlpack.ErrDataType
// for types ONNX Runtime lacks, dlpack.ErrShape for 0-d or negative shapes.
func NewOutput(dt dlpack.DataType, shape []int64) (*Tensor, error) {
	k, err := kindFor(dt)
	if err != nil {
		return nil, err
	}
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	data, nbytes, release, err := k.alloc(shape)
	if err != nil {
		return nil, err
	}
	return newTensor(k, dt, append([]int64(nil), shape...), data, nbytes, release, true)
}

// check accepts CPU tensors of a type ONNX Runtime has, not 0-d.
func check(f dlpack.Foreign) (kind, error) {
	if d := f.Device(); d.Type != dlpack.CPU {
		return kind{}, &dlpack.FieldError{Field: "dl_tensor.device", Value: d, Err: dlpack.ErrDevice,
			Why: "tensors made here live on the CPU"}
	}
	k, err := kindFor(f.DataType())
	if err == nil {
		err = checkShape(f.Shape())
	}
	return k, err
}

// newTensor wraps data (nil when empty) in an ONNX Runtime value. On error
// it calls release.
func newTensor(k kind, dt dlpack.DataType, shape []int64, data unsafe.Pointer, nbytes uintptr, release func() error, copied bool) (*Tensor, error) {
	if err := acquire(); err != nil {
		release()
		return nil, err
	}
	s := &state{release: release, data: data, nbytes: nbytes, capacity: nbytes, dtype: dt, shape: shape, copied: copied}
	v, raw, err := s.makeValues(k, shape, nbytes)
	if err != nil {
		s.pin.Unpin()
		release()
		releaseLib()
		return nil, err
	}
	s.value = v
	s.rawv.Store((*byte)(raw))
	s.refs.Store(1)
	s.owned.Store(true)
	t := &Tensor{customData: v, s: s}
	s.cleanup = runtime.AddCleanup(t, (*state).dropOwner, s)
	return t, nil
}

// makeValues makes the two ONNX Runtime values over the first nbytes of
// the memory with the given shape: onnxruntime_go's (the Tensor's
// ort.Value) and this package's (for a Session).
func (s *state) makeValues(k kind, shape []int64, nbytes uintptr) (*ort.CustomDataTensor, unsafe.Pointer, error) {
	bytes := unsafe.Slice((*byte)(s.data), nbytes)
	if nbytes == 0 {
		// onnxruntime_go wants at least one byte even for no elements.
		if s.empty == nil {
			s.empty = make([]byte, 1)
			s.pin.Pin(&s.empty[0])
		}
		bytes = s.empty
	} else {
		// A no-op for memory outside the Go heap; Go memory stays
		// pinned for as long as ONNX Runtime may read it, until the
		// last release.
		s.pin.Pin(s.data)
	}
	v, err := ort.NewCustomDataTensor(ort.Shape(shape), bytes, k.ort)
	var raw unsafe.Pointer
	if err == nil {
		raw, err = newRawValue(unsafe.Pointer(unsafe.SliceData(bytes)), nbytes, shape, int(k.ort))
		if err != nil {
			v.Destroy()
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dlonnx: ONNX Runtime refused the tensor %v%v: %w", s.dtype, shape, err)
	}
	return v, raw, nil
}

// Destroy releases the Tensor's ONNX Runtime values and gives up the Go
// owner's share of the memory: once no DLPack consumer holds it either, Go
// memory is unpinned and the memory reference dropped. It is idempotent
// and always returns nil; the Tensor must not be passed to Run afterwards.
func (t *Tensor) Destroy() error {
	t.s.cleanup.Stop()
	t.s.dropOwner()
	return nil
}

// Close is Destroy: the name every owner of this library has for
// releasing what it owns (Destroy is the name onnxruntime_go's values use).
func (t *Tensor) Close() error { return t.Destroy() }

// dropOwner releases the ONNX Runtime values at once (the consumers hold
// the memory, not the values) and the owner's share of the memory.
func (s *state) dropOwner() {
	if s.owned.CompareAndSwap(true, false) {
		raw := s.rawv.Swap(nil)
		s.value.Destroy()
		releaseRawValue(unsafe.Pointer(raw))
		releaseLib()
		s.unref()
	}
}

func (s *state) unref() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.pin.Unpin()
	s.release()
}

// raw returns this package's OrtValue over the memory; nil once destroyed.
func (t *Tensor) raw() unsafe.Pointer { return unsafe.Pointer(t.s.rawv.Load()) }

// Copied reports whether the Tensor holds its own memory (CopyToValue,
// NewOutput) rather than sharing its producer's (ToValue).
func (t *Tensor) Copied() bool { return t.s.copied }

// DType returns the DLPack data type of the elements.
func (t *Tensor) DType() dlpack.DataType { return t.s.dtype }

// Shape returns a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.s.shape...) }

// consumerRef is the Owner of a description: each consumer's release
// drops one share.
type consumerRef struct{ s *state }

// ReleaseTensor drops the share of the consumer that received the tensor.
func (r consumerRef) ReleaseTensor() { r.s.unref() }

// DescribeTensor implements dlpack.Source: the tensor's memory, compact
// row-major on the CPU and writable. Every consumer holds a share of the
// Tensor until it releases it, so the memory outlives Destroy as long as
// one needs it. It fails with dlpack.ErrClosed once the last share is
// gone.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	s := t.s
	return describeShare(d, &s.refs, consumerRef{s}, s.dtype, s.shape, s.data, s.nbytes)
}

// describeShare fills d with compact row-major CPU memory (data, nbytes)
// for one more consumer, whose share of refs owner drops at its release;
// dlpack.ErrClosed once the last share is gone. Tensor and Output both
// describe themselves with it.
func describeShare(d *dlpack.Description, refs *atomic.Int64, owner dlpack.Releaser, dt dlpack.DataType, shape []int64, data unsafe.Pointer, nbytes uintptr) error {
	if !holdShare(refs) {
		return dlpack.ErrClosed
	}
	*d = dlpack.Description{DType: dt, Shape: append([]int64(nil), shape...), Device: dlpack.CPUDevice, Owner: owner}
	if nbytes > 0 {
		d.Data, d.Size = data, nbytes
	}
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer with dlpack.Produce: the tensor's
// memory without a copy unless req asks for one.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(t, req) }

// holdShare takes one more share of a count that has not yet fallen to
// zero: once the last share is gone, nothing may bring the memory back.
func holdShare(refs *atomic.Int64) bool {
	for {
		n := refs.Load()
		if n == 0 {
			return false
		}
		if refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
