package dlpack

import (
	"strconv"
	"structs"
	"unsafe"
)

// ---- Export: Go memory lent to C ------------------------------------------

// prefix mirrors godlpack_prefix, the hidden header this package writes in
// front of every managed struct it allocates. The deleters read the handle
// and generation from here, never from fields a consumer could have changed.
type prefix struct {
	_      structs.HostLayout
	handle uint64
	gen    uint64
	magic  uint64
}

type exportKind uint8

const (
	exportStrides exportKind = iota + 1
	exportOffset
	exportReadOnly
	exportCopied
)

// ExportOption changes how Export, ExportLegacy and the Buffer exports
// describe the data. The zero value does nothing.
type ExportOption struct {
	kind    exportKind
	strides []int64
	offset  int
}

// WithStrides sets the strides, in elements, one per dimension; they may be
// zero or negative. Without it the tensor is compact row-major. The
// exported struct always carries non-NULL strides for ndim > 0.
func WithStrides(strides ...int64) ExportOption {
	return ExportOption{kind: exportStrides, strides: strides}
}

// WithOffset makes data[elem] the tensor's first element (index 0 in every
// dimension). With negative strides the tensor reaches below it.
func WithOffset(elem int) ExportOption { return ExportOption{kind: exportOffset, offset: elem} }

// ReadOnly sets FlagReadOnly: consumers must not write the data. Legacy
// tensors cannot carry the flag, so ExportLegacy refuses it with ErrReadOnly.
func ReadOnly() ExportOption { return ExportOption{kind: exportReadOnly} }

// Copied sets FlagIsCopied: the caller states that the consumer is the only
// user of this data until it releases it (for example, a fresh copy).
func Copied() ExportOption { return ExportOption{kind: exportCopied} }

// plan is a checked export: geometry inside the data, flags, first
// element. It is pointer-free; the shape and strides are in the block.
type plan struct {
	extent
	ndim  int
	flags Flags
	first int // index of the first element in the data
}

// planExport checks shape and options against a buffer of n elements and
// writes the shape and strides to out, which has room for 2*len(shape)
// entries (len(shape) <= MaxNDim is checked by the caller).
func planExport(p *plan, n int, shape []int64, opts []ExportOption, legacy bool, out []int64) error {
	*p = plan{ndim: len(shape)}
	var strides []int64
	for _, o := range opts {
		switch o.kind {
		case exportStrides:
			if o.strides == nil {
				strides = []int64{}
			} else {
				strides = o.strides
			}
		case exportOffset:
			p.first = o.offset
		case exportReadOnly:
			p.flags |= FlagReadOnly
		case exportCopied:
			p.flags |= FlagIsCopied
		}
	}
	if strides != nil && len(strides) != len(shape) {
		return fieldErr(ErrStrides, "strides", clone(strides), "want "+strconv.Itoa(len(shape))+" strides for the shape")
	}
	if legacy && p.flags&FlagReadOnly != 0 {
		return fieldErr(ErrReadOnly, "flags", FlagReadOnly, "legacy tensors cannot signal read-only; export versioned")
	}
	nd := p.ndim
	outStrides := out[nd : 2*nd : 2*nd]
	var err error
	if p.extent, err = checkDims(shape, strides, out[:nd:nd], outStrides, ""); err != nil {
		return err
	}
	if p.numel > 0 {
		lo, loOK := addCheck(int64(p.first), p.minOff)
		hi, hiOK := addCheck(int64(p.first), p.maxOff)
		if p.first < 0 || !loOK || !hiOK || lo < 0 || hi >= int64(n) {
			return fieldErr(ErrShape, "shape", clone(shape),
				"with strides "+formatInts(outStrides)+" and offset "+strconv.Itoa(p.first)+
					" the tensor reaches elements "+strconv.FormatInt(lo, 10)+".."+strconv.FormatInt(hi, 10)+
					" of a slice of length "+strconv.Itoa(n))
		}
	}
	return nil
}

func formatInts(v []int64) string {
	s := "["
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatInt(x, 10)
	}
	return s + "]"
}

func headerSize(legacy bool) uintptr {
	if legacy {
		return unsafe.Sizeof(ManagedTensor{})
	}
	return unsafe.Sizeof(ManagedTensorVersioned{})
}

// newBlock allocates a one-off C block (prefix, managed struct, shape,
// strides) for ndim dimensions, freed by its deleter; or nil.
func newBlock(legacy bool, ndim int) unsafe.Pointer {
	return cMalloc(unsafe.Sizeof(prefix{}) + headerSize(legacy) + 16*uintptr(ndim))
}

// blockDims returns the shape-and-strides area of a block (2*ndim entries).
func blockDims(block unsafe.Pointer, legacy bool, ndim int) []int64 {
	return unsafe.Slice((*int64)(unsafe.Add(block, unsafe.Sizeof(prefix{})+headerSize(legacy))), 2*ndim)
}

// checkNDim is the first check of every export: ndim decides the block.
func checkNDim(shape []int64) error {
	if len(shape) > MaxNDim {
		return fieldErr(ErrNDim, "ndim", len(shape), "must be 0.."+strconv.Itoa(MaxNDim))
	}
	return nil
}

// writeBlock fills a C block (prefix, managed struct; planExport already
// wrote the shape and strides) and returns the address of the managed
// struct.
//
// The struct is built on the stack and copied into the block as plain
// words. A typed store would run the GC's write barrier on the pointer
// fields (shape, strides), which also inspects the values being
// overwritten: in a fresh malloc block those are garbage, and garbage that
// looks like a bad heap pointer (or is Go's 0xdeaddeaddeaddead poison)
// makes the GC abort the process.
func writeBlock(block unsafe.Pointer, legacy bool, pre prefix, ctx, deleter, data uintptr, dt DataType, dev Device, p *plan) unsafe.Pointer {
	n := p.ndim
	*(*prefix)(block) = pre
	m := unsafe.Add(block, unsafe.Sizeof(prefix{}))
	t := Tensor{Data: data, Device: dev, NDim: int32(n), DType: dt}
	if n > 0 {
		dims := blockDims(block, legacy, n)
		t.Shape, t.Strides = &dims[0], &dims[n]
	}
	if legacy {
		storeWords(m, &ManagedTensor{DLTensor: t, ManagerCtx: ctx, Deleter: deleter})
	} else {
		storeWords(m, &ManagedTensorVersioned{Version: CurrentVersion, ManagerCtx: ctx, Deleter: deleter, Flags: p.flags, DLTensor: t})
	}
	return m
}

// storeWords copies *v to dst as plain 64-bit words: no write barrier.
func storeWords[T ManagedTensor | ManagedTensorVersioned](dst unsafe.Pointer, v *T) {
	n := unsafe.Sizeof(*v) / 8
	copy(unsafe.Slice((*uint64)(dst), n), unsafe.Slice((*uint64)(unsafe.Pointer(v)), n))
}

// exportGo lends n elements of Go memory at base (elemSize bytes each) to C.
func exportGo(base unsafe.Pointer, n, capBytes uintptr, elemSize uintptr, dt DataType, shape []int64, opts []ExportOption, legacy bool) (unsafe.Pointer, error) {
	if !cgoEnabled {
		return nil, ErrCgoRequired
	}
	if err := checkNDim(shape); err != nil {
		return nil, err
	}
	// The record and its block come first: the plan is written straight
	// into the block.
	nd := len(shape)
	rec, block, oneOff := recordAndBlock(legacy, nd)
	if block == nil {
		return nil, ErrNoMemory
	}
	var p plan
	err := planExport(&p, int(n), shape, opts, legacy, blockDims(block, legacy, nd))
	if err != nil {
		if oneOff {
			cFree(block)
		}
		putRecord(rec)
		return nil, err
	}
	if oneOff {
		oneOffExports.Add(1)
	}
	data := emptyData
	if p.numel > 0 {
		rec.pinner.Pin(base)
		rec.base, rec.size = base, capBytes
		data = uintptr(base) + uintptr(p.first)*elemSize
	}
	deleter := deleterGoVersioned
	if legacy {
		deleter = deleterGoLegacy
	}
	m := writeBlock(block, legacy, prefix{handle: uint64(rec.handle), gen: rec.gen.Load(), magic: magicGo}, rec.handle, deleter, data, dt, CPUDevice, &p)
	goExports.add(rec, 1)
	return m, nil
}

// Export lends data to a C consumer as a DLPack 1.3 managed tensor, without
// copying. shape (and WithStrides, WithOffset) describe which elements of
// data form the tensor; they must stay inside data, else the error wraps
// ErrShape. The struct, shape and strides live in one C allocation that the
// consumer may keep as long as it likes.
//
// Contract: the consumer calls the returned struct's deleter exactly once,
// from any thread (also one Go never created). Until then the data stays
// pinned and reachable, and Outstanding counts the export. The Go side must
// not change the data while a consumer may read it (Go's race detector
// cannot see C readers), and must not write it at all when exported with
// ReadOnly. Passing the result to C:
//
//	m, err := dlpack.Export(xs, []int64{2, 3})
//	if err != nil { ... }
//	C.consume((*C.DLManagedTensorVersioned)(unsafe.Pointer(m)))
func Export[T Element](data []T, shape []int64, opts ...ExportOption) (*ManagedTensorVersioned, error) {
	var z T
	m, err := exportGo(unsafe.Pointer(unsafe.SliceData(data)), uintptr(len(data)), uintptr(cap(data))*unsafe.Sizeof(z),
		unsafe.Sizeof(z), DataTypeOf[T](), shape, opts, false)
	return (*ManagedTensorVersioned)(m), err
}

// ExportLegacy is Export for consumers that only know the pre-1.0
// DLManagedTensor. Legacy tensors carry no flags: ReadOnly is refused
// (ErrReadOnly) and Copied is ignored.
func ExportLegacy[T Element](data []T, shape []int64, opts ...ExportOption) (*ManagedTensor, error) {
	var z T
	m, err := exportGo(unsafe.Pointer(unsafe.SliceData(data)), uintptr(len(data)), uintptr(cap(data))*unsafe.Sizeof(z),
		unsafe.Sizeof(z), DataTypeOf[T](), shape, opts, true)
	return (*ManagedTensor)(m), err
}
