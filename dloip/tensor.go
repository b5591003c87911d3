package dloip

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Align is the alignment of every received tensor's data that a Tensor
// shares: JAX aliases CPU memory only at 64 bytes.
const Align = 64

// Tensor is a tensor received over the protocol: an output that
// Client.Infer returns, or an input a Model is given. It is a CPU tensor,
// a dlpack.Source and a dlpack.Producer, and shares its memory:
//
//   - raw contents: the 64-byte aligned buffer that the codec copied the
//     bytes into, once, out of gRPC's frame buffers (see the package
//     documentation); the memory is the receiver's alone, so the tensor is
//     writable;
//   - typed contents (InferTensorContents, as some peers send): a buffer
//     the values were decoded into, once; IsCopied reports it;
//   - shared memory: the registered region itself (read-only), which
//     stays mapped while the Tensor or any export of it is alive.
//
// Memory whose first element is not at a multiple of Align (a
// shared-memory offset a peer chose) is not shared: DescribeTensor refuses
// it (dlpack.ErrAlignment) and DLPack answers with a copy carrying
// dlpack.FlagIsCopied, or refuses under dlpack.CopyNever.
type Tensor struct {
	name     string
	datatype string
	dtype    dlpack.DataType
	shape    []int64
	data     []byte
	params   Parameters
	copied   bool
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

func newOwner(data []byte, release func()) *owner {
	o := &owner{data: data, release: release}
	o.refs.Store(1)
	return o
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

// newTensor checks that data holds exactly a tensor of datatype and
// shape; what names the tensor in errors ("input", "output").
func newTensor(what, name, datatype string, shape []int64, data []byte, release func()) (*Tensor, error) {
	dt, err := ParseDatatype(datatype)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	n, err := byteSize(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	if int64(len(data)) != n {
		return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: byte length", what, name), Value: len(data), Err: ErrInvalid,
			Why: fmt.Sprintf("%s %v needs %d bytes", datatype, shape, n)}
	}
	if len(shape) > dlpack.MaxNDim {
		return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: shape", what, name), Value: len(shape), Err: ErrShape,
			Why: fmt.Sprintf("more than %d dimensions", dlpack.MaxNDim)}
	}
	return &Tensor{name: name, datatype: datatype, dtype: dt, shape: append([]int64{}, shape...), data: data,
		owner: newOwner(data, release)}, nil
}

// Name is the tensor's name in the request or response.
func (t *Tensor) Name() string { return t.name }

// Datatype is the protocol datatype ("FP32", ...).
func (t *Tensor) Datatype() string { return t.datatype }

// DataType is the element type.
func (t *Tensor) DataType() dlpack.DataType { return t.dtype }

// Shape is a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape...) }

// Parameters are the tensor's protocol parameters as received (nil when
// none).
func (t *Tensor) Parameters() Parameters { return t.params }

// Bytes is the tensor's data, row-major, little-endian, shared (not a
// copy): valid until the Tensor is released and every export's deleter
// has run. Do not write to it when ReadOnly.
func (t *Tensor) Bytes() []byte { return t.data }

// IsCopied reports whether the values arrived as typed contents and were
// decoded into a buffer of their own, rather than as raw bytes.
func (t *Tensor) IsCopied() bool { return t.copied }

// ReadOnly reports whether the memory is a shared-memory region that
// other processes use: exports are then read-only.
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
// memory or fails with dlpack.ErrClosed.
func (t *Tensor) Close() error {
	if t.released.CompareAndSwap(false, true) {
		t.owner.ReleaseTensor()
	}
	return nil
}

// hold takes a reference for an export of t: false once t is released.
func (t *Tensor) hold() bool {
	if t.released.Load() || !t.owner.acquire() {
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
			Why: fmt.Sprintf("the values lie off a %d-byte boundary; DLPack copies them", Align)}
	}
	if !t.hold() {
		return dlpack.ErrClosed
	}
	t.describe(d)
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer: the memory, shared; for memory off
// an Align boundary, an aligned copy with FlagIsCopied.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if t.Aligned() {
		return dlpack.Produce(t, req)
	}
	if req.Copy == dlpack.CopyNever {
		return dlpack.Managed{}, &dlpack.FieldError{Field: "request.copy", Value: req.Copy, Err: dlpack.ErrRequest,
			Why: fmt.Sprintf("the values at %#x are not %d-byte aligned", t.DataAddr(), Align)}
	}
	req.Copy = dlpack.CopyAlways
	return dlpack.Produce(unaligned{t}, req)
}

// unaligned describes misaligned memory, only ever to copy it.
type unaligned struct{ t *Tensor }

func (u unaligned) DescribeTensor(d *dlpack.Description) error {
	if !u.t.hold() {
		return dlpack.ErrClosed
	}
	u.t.describe(d)
	return nil
}
