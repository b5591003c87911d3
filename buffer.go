package dlpack

import (
	"strconv"
	"structs"
	"sync"
	"sync/atomic"
	"unsafe"
)

// bufctl mirrors godlpack_bufctl, the control block of a Buffer.
type bufctl struct {
	_      structs.HostLayout
	refs   int64
	nbytes uint64
}

// bufferDataOffset is where a Buffer's data starts after its control block.
const bufferDataOffset = 256

// Buffer is a tensor's worth of C memory, 256-byte aligned and zeroed, that
// Go reads and writes through Data and lends to consumers with Export. No
// Go object is pinned and the deleters are pure C: this is the mode for
// high-rate exchange and for consumers that release during process exit.
//
// The memory is reference counted: Close drops Go's reference and each
// export holds one until its deleter runs, so the memory lives until the
// last of them. The slice from Data must not be used after Close. A Buffer
// that is never closed is never freed (it holds no Go memory, so no
// cleanup can tell when Data's slices are gone).
type Buffer[T Element] struct {
	mu    sync.RWMutex
	ctl   unsafe.Pointer // *bufctl in C memory; nil after Close
	data  []T
	shape []int64
}

// NewBuffer allocates a compact row-major buffer of the given shape.
func NewBuffer[T Element](shape []int64) (*Buffer[T], error) {
	if !cgoEnabled {
		return nil, ErrCgoRequired
	}
	if err := checkNDim(shape); err != nil {
		return nil, err
	}
	n := len(shape)
	dims := make([]int64, 2*n)
	e, err := checkDims(shape, nil, dims[:n:n], dims[n:], "")
	if err != nil {
		return nil, err
	}
	var z T
	nbytes, ok := mulCheck(e.numel, int64(unsafe.Sizeof(z)))
	if !ok || uint64(nbytes) > uint64(^uintptr(0)>>1)-2*bufferAlign {
		return nil, fieldErr(ErrOverflow, "shape", clone(shape), "buffer size overflows")
	}
	ctl := cBufferAlloc(uint64(nbytes))
	if ctl == nil {
		return nil, fieldErr(ErrNoMemory, "shape", clone(shape), strconv.FormatInt(nbytes, 10)+" bytes")
	}
	b := &Buffer[T]{ctl: ctl, shape: dims[:n:n]}
	if e.numel > 0 {
		b.data = unsafe.Slice((*T)(unsafe.Add(ctl, bufferDataOffset)), e.numel)
	}
	return b, nil
}

// Data returns the buffer's elements in row-major order; nil after Close.
func (b *Buffer[T]) Data() []T {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.data
}

// Shape returns a copy of the buffer's shape.
func (b *Buffer[T]) Shape() []int64 { return append([]int64(nil), b.shape...) }

// Export lends the buffer (or, with WithStrides and WithOffset, a strided
// view of it) to a C consumer, like the package-level Export. The buffer's
// memory lives until the consumer calls the deleter, even after Close. A
// shape other than the buffer's may be given; with none, the buffer's is
// used.
func (b *Buffer[T]) Export(shape []int64, opts ...ExportOption) (*ManagedTensorVersioned, error) {
	m, err := b.export(shape, opts, false)
	return (*ManagedTensorVersioned)(m), err
}

// ExportLegacy is Export for pre-1.0 consumers.
func (b *Buffer[T]) ExportLegacy(shape []int64, opts ...ExportOption) (*ManagedTensor, error) {
	m, err := b.export(shape, opts, true)
	return (*ManagedTensor)(m), err
}

func (b *Buffer[T]) export(shape []int64, opts []ExportOption, legacy bool) (unsafe.Pointer, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.ctl == nil {
		return nil, ErrClosed
	}
	if shape == nil {
		shape = b.shape
	}
	if err := checkNDim(shape); err != nil {
		return nil, err
	}
	block := newBlock(legacy, len(shape))
	if block == nil {
		return nil, ErrNoMemory
	}
	var p plan
	err := planExport(&p, len(b.data), shape, opts, legacy, blockDims(block, legacy, len(shape)))
	if err != nil {
		cFree(block)
		return nil, err
	}
	var z T
	data := emptyData
	if p.numel > 0 {
		data = uintptr(b.ctl) + bufferDataOffset + uintptr(p.first)*unsafe.Sizeof(z)
	}
	ctl := (*bufctl)(b.ctl)
	atomic.AddInt64(&ctl.refs, 1)
	deleter := deleterBufferVersioned
	if legacy {
		deleter = deleterBufferLegacy
	}
	m := writeBlock(block, legacy, prefix{handle: uint64(uintptr(b.ctl)), magic: magicBuffer}, uintptr(b.ctl), deleter, data, DataTypeOf[T](), CPUDevice, &p)
	atomic.AddInt64(bufferExports, 1)
	return m, nil
}

// Close drops Go's reference to the buffer. The memory is freed now if no
// export is outstanding, else when the last consumer releases it. Close is
// idempotent and safe to call from several goroutines.
func (b *Buffer[T]) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctl == nil {
		return nil
	}
	if atomic.AddInt64(&(*bufctl)(b.ctl).refs, -1) == 0 {
		cFree(b.ctl)
	}
	b.ctl, b.data = nil, nil
	return nil
}

// bufferRef is one reference to a Buffer's memory, held by a described
// export and dropped by its release. It is pointer-shaped, so storing it
// in Description.Owner allocates nothing.
type bufferRef struct{ ctl unsafe.Pointer }

func (r bufferRef) ReleaseTensor() {
	if atomic.AddInt64(&(*bufctl)(r.ctl).refs, -1) == 0 {
		cFree(r.ctl)
	}
}

// DescribeTensor implements Source: the buffer's memory, compact, with a
// reference that keeps it alive after Close until the last consumer.
func (b *Buffer[T]) DescribeTensor(d *Description) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.ctl == nil {
		return ErrClosed
	}
	atomic.AddInt64(&(*bufctl)(b.ctl).refs, 1)
	var z T
	d.Data = unsafe.Add(b.ctl, bufferDataOffset)
	d.Size = uintptr(len(b.data)) * unsafe.Sizeof(z)
	d.DType = DataTypeOf[T]()
	d.Shape = b.shape
	d.Owner = bufferRef{ctl: b.ctl}
	return nil
}

// DLPackDevice implements Producer: the CPU.
func (b *Buffer[T]) DLPackDevice() Device { return CPUDevice }

// DLPack implements Producer. A request the buffer can share as it is
// (no copy asked for, the CPU, no stream) gets the buffer's own export,
// whose deleter is pure C; every other request goes through Produce.
func (b *Buffer[T]) DLPack(req Request) (Managed, error) {
	shareAsIs := (req.Copy == CopyIfNeeded || req.Copy == CopyNever) &&
		(req.Device == Device{} || req.Device == CPUDevice) &&
		(!req.HasStream || req.Stream == -1)
	if !shareAsIs {
		return Produce(b, req)
	}
	p, err := b.export(nil, nil, req.IsLegacy())
	return managedOf(p, req.IsLegacy()), err
}
