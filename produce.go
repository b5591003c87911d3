package dlpack

import (
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack/internal/nilcheck"
)

// produceState is Produce's scratch: the Description handed to the Source
// (a pointer passed to an interface method escapes) and the checked copy,
// pooled so that an export allocates nothing.
type produceState struct {
	d    Description
	c    checked
	dims [2 * keptNDim]int64
}

var producePool = sync.Pool{New: func() any { return new(produceState) }}

// Produce is the whole producer side of the protocol for a Source. It
// validates the description, negotiates the request (versioned or legacy
// by MaxVersion; read-only data copied for legacy and writing consumers
// unless CopyNever; CopyAlways copies; the device must match; CPU tensors
// take no stream), and hands out either the memory itself, with d.Owner
// kept until the consumer's deleter runs, or a compact copy in 256-byte
// aligned C memory that owes nothing to the source. Memory whose first
// element is misaligned for its type (DataType.Alignment) is never handed
// out: it is copied (FlagIsCopied) unless the request forbids copies or the
// CPU cannot read it, and then refused with ErrAlignment.
//
// Offsets are folded into the data pointer (byte_offset is 0, as consumers
// that ignore byte_offset expect), strides are always sent, and Go memory
// is pinned until the deleter. On error nothing is outstanding and the
// owner has been released. A nil s, or a nil pointer (a typed nil such as
// a nil *Array), is refused with an error wrapping ErrNilPointer.
func Produce(s Source, req Request) (Managed, error) {
	if nilcheck.IsNil(s) {
		return Managed{}, nilProducer(s)
	}
	if !cgoEnabled {
		return Managed{}, ErrCgoRequired
	}
	ps := producePool.Get().(*produceState)
	err := s.DescribeTensor(&ps.d)
	var m Managed
	if err == nil {
		m, err = produceDescribed(ps, req, s)
	}
	ps.d = Description{}
	ps.c.shape, ps.c.strides = nil, nil
	producePool.Put(ps)
	return m, err
}

// produceDescribed exports the description in ps, which the caller got
// from s; it owns one reference to ps.d.Owner.
func produceDescribed(ps *produceState, req Request, s Source) (Managed, error) {
	owner, pinned := ps.d.Owner, ps.d.Pinned
	d, c, err := checkedOf(&ps.d, &ps.c, ps.dims[:])
	var copyData bool
	if err == nil {
		copyData, err = negotiate(c, &req, hostReadable(d, c))
	}
	if err == nil && !copyData {
		copyData, err = realign(c, &req, hostReadable(d, c))
	}
	if err == nil && req.HasStream && c.device.Type != CPU && !copyData {
		if ss, ok := s.(StreamSyncer); ok {
			err = ss.SyncStream(c.device, req.Stream)
		}
	}
	if err != nil {
		releaseOwner(owner)
		return Managed{}, err
	}
	legacy := req.IsLegacy()
	if copyData {
		var src unsafe.Pointer
		if c.numel > 0 {
			src = unsafe.Add(d.Data, d.ByteOffset)
		}
		p, err := exportCopy(c, src, legacy)
		releaseOwner(owner)
		return managedOf(p, legacy), err
	}
	var base unsafe.Pointer
	if c.numel > 0 {
		base = d.Data
	}
	p, err := exportShared(c, base, d.Size, owner, pinned, legacy)
	if err != nil {
		releaseOwner(owner)
	}
	return managedOf(p, legacy), err
}

func managedOf(p unsafe.Pointer, legacy bool) Managed {
	switch {
	case p == nil:
		return Managed{}
	case legacy:
		return Managed{Legacy: (*ManagedTensor)(p)}
	}
	return Managed{Versioned: (*ManagedTensorVersioned)(p)}
}

// exportShared lends described memory to a consumer through an export
// record: Go memory at base is pinned (unless the Source keeps it pinned:
// pinned), owner is kept and released by the deleter. c is the checked
// description.
func exportShared(c *checked, base unsafe.Pointer, size uintptr, owner any, pinned, legacy bool) (unsafe.Pointer, error) {
	nd := c.ndim
	rec, block, oneOff := recordAndBlock(legacy, nd)
	if block == nil {
		return nil, ErrNoMemory
	}
	dims := blockDims(block, legacy, nd)
	copy(dims[:nd], c.shape)
	copy(dims[nd:], c.strides)
	if oneOff {
		oneOffExports.Add(1)
	}
	data := c.data
	if c.numel == 0 {
		data = emptyData
	} else if base != nil {
		if !pinned {
			rec.pinner.Pin(base) // the release unpins it (a no-op when pinned is set)
		}
		rec.base, rec.size = base, size
	}
	rec.owner = owner
	deleter := deleterGoVersioned
	if legacy {
		deleter = deleterGoLegacy
	}
	p := plan{extent: c.extent, ndim: nd, flags: c.flags & (FlagReadOnly | FlagIsCopied)}
	m := writeBlock(block, legacy, prefix{handle: uint64(rec.handle), gen: rec.gen.Load(), magic: magicGo}, rec.handle, deleter, data, c.dtype, c.device, &p)
	goExports.add(rec, 1)
	return m, nil
}

// exportCopy copies the elements of a checked CPU tensor whose first
// element is at src into a new compact row-major buffer and exports it
// with a pure-C deleter; versioned copies carry FlagIsCopied, and
// FlagReadOnly is dropped (the copy is the consumer's alone).
func exportCopy(c *checked, src unsafe.Pointer, legacy bool) (unsafe.Pointer, error) {
	item := int64(c.dtype.ItemSize())
	nbytes, ok := mulCheck(c.numel, item)
	if !ok || uint64(nbytes) > uint64(^uintptr(0)>>1)-2*bufferAlign {
		return nil, fieldErr(ErrOverflow, "shape", clone(c.shape), "copy size overflows")
	}
	nd := c.ndim
	block := newBlock(legacy, nd)
	if block == nil {
		return nil, ErrNoMemory
	}
	ctl := cBufferAlloc(uint64(nbytes))
	if ctl == nil {
		cFree(block)
		return nil, fieldErr(ErrNoMemory, "shape", clone(c.shape), strconv.FormatInt(nbytes, 10)+" bytes")
	}
	dst := unsafe.Add(ctl, bufferDataOffset)
	if c.numel > 0 {
		copyStrided(dst, src, c.shape, c.strides, item)
	}
	dims := blockDims(block, legacy, nd)
	e, _ := checkDims(c.shape, nil, dims[:nd:nd], dims[nd:2*nd:2*nd], "")
	p := plan{extent: e, ndim: nd}
	if !legacy {
		p.flags = FlagIsCopied
	}
	deleter := deleterBufferVersioned
	if legacy {
		deleter = deleterBufferLegacy
	}
	m := writeBlock(block, legacy, prefix{handle: uint64(uintptr(ctl)), magic: magicBuffer}, uintptr(ctl), deleter, uintptr(dst), c.dtype, CPUDevice, &p)
	atomic.AddInt64(bufferExports, 1)
	return m, nil
}

// copyStrided copies the elements (item bytes each) of a strided tensor
// whose first element is at src to dst in row-major order.
func copyStrided(dst, src unsafe.Pointer, shape, strides []int64, item int64) {
	if len(shape) == 0 {
		copy(unsafe.Slice((*byte)(dst), item), unsafe.Slice((*byte)(src), item))
		return
	}
	if isRowMajor(shape, strides, numelOf(shape)) {
		n := numelOf(shape) * item
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
		return
	}
	var walk func(dim int, s unsafe.Pointer)
	off := int64(0)
	walk = func(dim int, s unsafe.Pointer) {
		st := strides[dim] * item
		if dim == len(shape)-1 {
			for i := int64(0); i < shape[dim]; i++ {
				copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), item), unsafe.Slice((*byte)(unsafe.Add(s, i*st)), item))
				off += item
			}
			return
		}
		for i := int64(0); i < shape[dim]; i++ {
			walk(dim+1, unsafe.Add(s, i*st))
		}
	}
	walk(0, src)
}

func numelOf(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}
