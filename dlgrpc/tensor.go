package dlgrpc

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Tensor is a tensor received over the wire: a CPU tensor sharing the
// memory its bytes were copied into, once, out of gRPC's frame buffers
// (a 64-byte aligned buffer of the Allocator), or a shared-memory region
// the peer named. It is a dlpack.Source and a dlpack.Producer, so NumPy,
// JAX, ONNX Runtime or gonum take it without another copy.
//
// The memory lives until the Tensor is closed and every export's
// deleter has run: the Tensor and each export hold a reference, and the
// last one lets the memory go (back to the Allocator, or unmapped).
// Memory whose first element is not at a multiple of Align (values a
// peer placed off a 64-byte boundary) is never shared by chance:
// DescribeTensor refuses it (dlpack.ErrAlignment) and DLPack answers
// with an aligned copy carrying dlpack.FlagIsCopied, or refuses it under
// dlpack.CopyNever.
type Tensor struct {
	dtype    dlpack.DataType
	shape    []int64
	data     []byte
	readOnly bool
	owner    *owner
	released atomic.Bool
}

// owner counts the references to received memory: the Tensor's own and
// one per export; the last drop runs release (nil for Go memory, which
// the garbage collector frees).
type owner struct {
	refs    atomic.Int64
	data    []byte // keeps Go memory reachable while exports hold it
	release func()
}

// NewTensor makes a Tensor of data, a tensor of dtype and shape whose
// bytes it holds exactly (dlpack.ErrShape otherwise: the
// caller checks a peer's sizes before it allocates, and this check
// confirms them). release, when set, runs once when the Tensor and
// every export of it are released. readOnly marks memory other
// processes use (a shared-memory region): exports of it are read-only.
// On error release is not run.
func NewTensor(dtype dlpack.DataType, shape []int64, data []byte, readOnly bool, release func()) (*Tensor, error) {
	n, err := ByteSize(dtype, shape)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, &dlpack.FieldError{Field: "byte length", Value: len(data), Err: dlpack.ErrShape,
			Why: fmt.Sprintf("%v %v needs %d bytes", dtype, shape, n)}
	}
	o := &owner{data: data, release: release}
	o.refs.Store(1)
	return &Tensor{dtype: dtype, shape: append([]int64{}, shape...), data: data, readOnly: readOnly, owner: o}, nil
}

// ByteSize is the byte size of a tensor of dtype and shape: every
// dimension non-negative, at most dlpack.MaxNDim of them, and no
// overflow (ErrShape naming the dimension otherwise). A peer's declared
// shape goes through it before anything is allocated for it.
func ByteSize(dtype dlpack.DataType, shape []int64) (int64, error) {
	if len(shape) > dlpack.MaxNDim {
		return 0, &dlpack.FieldError{Field: "shape", Value: len(shape), Err: dlpack.ErrShape,
			Why: fmt.Sprintf("more than %d dimensions", dlpack.MaxNDim)}
	}
	n := int64(dtype.ItemSize())
	if dtype.Bits%8 != 0 || dtype.Lanes != 1 {
		return 0, &dlpack.FieldError{Field: "dtype", Value: dtype, Err: dlpack.ErrDataType, Why: "not whole bytes per element"}
	}
	for i, d := range shape {
		if d < 0 {
			return 0, &dlpack.FieldError{Field: fmt.Sprintf("shape[%d]", i), Value: d, Err: dlpack.ErrShape, Why: "a negative dimension"}
		}
		if d != 0 && n > (1<<62)/d {
			return 0, &dlpack.FieldError{Field: "shape", Value: shape, Err: dlpack.ErrShape, Why: "the byte size overflows"}
		}
		n *= d
	}
	return n, nil
}

// acquire takes a reference unless the last one is gone: a count never
// rises from zero, so a Close racing an export frees the memory once.
func (o *owner) acquire() bool {
	for {
		n := o.refs.Load()
		if n <= 0 {
			return false
		}
		if o.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ReleaseTensor implements dlpack.Releaser: an export's reference ends.
func (o *owner) ReleaseTensor() {
	if o.refs.Add(-1) == 0 && o.release != nil {
		o.release()
	}
}

// DataType is the element type.
func (t *Tensor) DataType() dlpack.DataType { return t.dtype }

// Shape is a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape...) }

// Bytes is the tensor's data, row-major, little-endian, shared (not a
// copy): valid until the Tensor is closed and every export's deleter has
// run. Do not write to it when ReadOnly.
func (t *Tensor) Bytes() []byte { return t.data }

// ReadOnly reports whether the memory is one other processes use (a
// shared-memory region): exports are then read-only.
func (t *Tensor) ReadOnly() bool { return t.readOnly }

// DataAddr is the address of the first element (0 for an empty tensor).
func (t *Tensor) DataAddr() uintptr {
	if len(t.data) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.data)))
}

// Aligned reports whether the data is Align-byte aligned (an empty tensor
// is).
func (t *Tensor) Aligned() bool { return t.DataAddr()%Align == 0 }

// Close drops the Tensor's reference; exports already made stay valid.
// Calling it again does nothing and returns nil. It may race DLPack and
// DescribeTensor on other goroutines: an export then either holds the
// memory or fails with dlpack.ErrClosed, and the memory is let go once.
func (t *Tensor) Close() error {
	if t.released.CompareAndSwap(false, true) {
		t.owner.ReleaseTensor()
	}
	return nil
}

// Hold takes a reference to the memory for as long as the caller uses
// Bytes, whatever its alignment (to send it on as it is, say); release
// lets it go. It fails with dlpack.ErrClosed once the Tensor is closed.
func (t *Tensor) Hold() (release func(), err error) {
	if !t.hold() {
		return nil, dlpack.ErrClosed
	}
	return t.owner.ReleaseTensor, nil
}

// hold takes a reference for an export of t: false once t is released
// (checked again after taking it, as Close may land in between).
func (t *Tensor) hold() bool {
	if t.released.Load() {
		return false
	}
	if acquireHook != nil {
		acquireHook()
	}
	if !t.owner.acquire() {
		return false
	}
	if t.released.Load() {
		t.owner.ReleaseTensor()
		return false
	}
	return true
}

func (t *Tensor) describe(d *dlpack.Description) {
	*d = dlpack.Description{DType: t.dtype, Shape: t.shape, Size: uintptr(len(t.data)), Owner: t.owner, ReadOnly: t.readOnly}
	if len(t.data) > 0 {
		d.Data = unsafe.Pointer(unsafe.SliceData(t.data))
	}
}

// DescribeTensor implements dlpack.Source.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	if !t.Aligned() {
		return &dlpack.FieldError{Field: "data", Value: fmt.Sprintf("%#x", t.DataAddr()), Err: dlpack.ErrAlignment,
			Why: fmt.Sprintf("the peer placed the values off a %d-byte boundary; DLPack copies them", Align)}
	}
	if !t.hold() {
		return dlpack.ErrClosed
	}
	t.describe(d)
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer: the received memory, shared; for
// memory off an Align boundary, an aligned copy with FlagIsCopied.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if t.Aligned() {
		return dlpack.Produce(t, req)
	}
	if req.Copy == dlpack.CopyNever {
		return dlpack.Managed{}, &dlpack.FieldError{Field: "request.copy", Value: req.Copy, Err: dlpack.ErrRequest,
			Why: fmt.Sprintf("the received values at %#x are not %d-byte aligned", t.DataAddr(), Align)}
	}
	req.Copy = dlpack.CopyAlways
	return dlpack.Produce(unaligned{t}, req)
}

// unaligned describes misaligned received memory, only ever to copy it.
type unaligned struct{ t *Tensor }

func (u unaligned) DescribeTensor(d *dlpack.Description) error {
	if !u.t.hold() {
		return dlpack.ErrClosed
	}
	u.t.describe(d)
	return nil
}

// acquireHook, when set (tests), runs just before an export takes its
// reference.
var acquireHook func()
