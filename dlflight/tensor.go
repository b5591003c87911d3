package dlflight

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Align is the alignment of every received tensor's data that a Tensor
// shares: JAX aliases CPU memory only at 64 bytes, and so does Arrow.
const Align = 64

// Tensor is a tensor received over Flight (Client.Get): a CPU tensor
// sharing the received message body, which the codec copied once out of
// gRPC's frame buffers into a 64-byte aligned buffer (see the package
// documentation). It is a dlpack.Source and a dlpack.Producer. The memory
// is the receiver's alone, so the tensor is writable.
//
// The body lives until the Tensor is released and every export's deleter
// has run. A body whose values a peer placed at an offset that is not a
// multiple of Align is not shared: DescribeTensor refuses it
// (dlpack.ErrAlignment) and DLPack answers with a copy carrying
// FlagIsCopied, or refuses it under dlpack.CopyNever.
type Tensor struct {
	dtype    dlpack.DataType
	shape    []int64
	data     []byte
	owner    *owner
	released atomic.Bool
}

// owner counts the references to received memory: the Tensor's own and
// one per export; the last drops release.
type owner struct {
	refs    atomic.Int64
	release func()
}

func newOwner(release func()) *owner {
	o := &owner{release: release}
	o.refs.Store(1)
	return o
}

// acquire takes a reference unless the last one is gone (the body freed
// or being freed): a count never rises from zero, so a Close racing an
// export frees the body once.
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

func (o *owner) ReleaseTensor() {
	if o.refs.Add(-1) == 0 && o.release != nil {
		o.release()
	}
}

// DataType is the element type.
func (t *Tensor) DataType() dlpack.DataType { return t.dtype }

// Shape is a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape...) }

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
// Calling it again does nothing. It may race DLPack and DescribeTensor
// on other goroutines: an export then either holds the body or fails
// with dlpack.ErrClosed, and the body is freed once. It returns nil.
func (t *Tensor) Close() error {
	if t.released.CompareAndSwap(false, true) {
		t.owner.ReleaseTensor()
	}
	return nil
}

// DescribeTensor implements dlpack.Source.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	if !t.Aligned() {
		return &dlpack.FieldError{Field: "data", Value: fmt.Sprintf("%#x", t.DataAddr()), Err: dlpack.ErrAlignment,
			Why: "the peer placed the values off a 64-byte boundary; DLPack copies them"}
	}
	if !t.hold() {
		return dlpack.ErrClosed
	}
	*d = dlpack.Description{DType: t.dtype, Shape: t.shape, Size: uintptr(len(t.data)), Owner: t.owner}
	if len(t.data) > 0 {
		d.Data = unsafe.Pointer(unsafe.SliceData(t.data))
	}
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer: the received memory, shared; for a
// misaligned body, an aligned copy with FlagIsCopied.
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

// unaligned describes a misaligned received body, only ever to copy it.
type unaligned struct{ t *Tensor }

func (u unaligned) DescribeTensor(d *dlpack.Description) error {
	if !u.t.hold() {
		return dlpack.ErrClosed
	}
	*d = dlpack.Description{DType: u.t.dtype, Shape: u.t.shape, Size: uintptr(len(u.t.data)), Owner: u.t.owner,
		Data: unsafe.Pointer(unsafe.SliceData(u.t.data))}
	return nil
}

// acquireHook, when set (tests), runs just before an export takes its
// reference to the body.
var acquireHook func()
