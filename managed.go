package dlpack

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ---- Export: Go memory lent to C ------------------------------------------

// prefix mirrors godlpack_prefix, the hidden header this package writes in
// front of every managed struct it allocates. The deleters read the handle
// and generation from here, never from fields a consumer could have changed.
type prefix struct {
	handle uint64
	gen    uint64
	magic  uint64
}

// bufctl mirrors godlpack_bufctl, the control block of a Buffer.
type bufctl struct {
	refs   int64
	nbytes uint64
}

// bufferDataOffset is where a Buffer's data starts after its control block.
const bufferDataOffset = 256

// exportRecord is the Go owner of one outstanding Go-memory export. Each
// record has a permanent cgo.Handle, which goes into manager_ctx and the
// block's prefix and keeps the record reachable (the handle table is a GC
// root); the record keeps the data reachable and pinned until the deleter.
// Records are recycled, handle and all, so an export costs no handle
// allocation; gen, written into each block's prefix and moved on by the
// release that claims it, makes a stale or repeated deleter call unable to
// release the record or its next export.
type exportRecord struct {
	pinner runtime.Pinner
	base   unsafe.Pointer // start of the exported Go object; nil for empty tensors
	size   uintptr        // bytes of the exported slice's backing array
	handle uintptr        // this record's cgo.Handle
	gen    atomic.Uint64  // generation of the current export; a release claims it by CAS
	shard  uint8          // the free-list shard it returns to
}

// maxFreeRecords bounds the records kept for reuse, per shard: a
// high-water mark of exports outstanding at once (a record is ~100 bytes
// plus its handle-table entry). Beyond it a released record's handle is
// deleted and the record left to the GC.
const maxFreeRecords = 4096

// The free list is sharded so that exports on different cores do not
// contend on one lock. A goroutine finds "its" shard through a sync.Pool of
// shard numbers, which is per-P in practice; the records themselves cannot
// live in a sync.Pool: the GC empties pools, and a record dropped that way
// would stay in the handle table forever.
const recordShards = 16

type recordShard struct {
	mu   sync.Mutex
	free []*exportRecord
	_    [64 - 32]byte // keep shards on separate cache lines
}

var (
	records   [recordShards]recordShard
	nextShard atomic.Uint32
	// shardTokens hands out shard numbers, round-robin when a P has none.
	shardTokens = sync.Pool{New: func() any {
		n := int(nextShard.Add(1) % recordShards)
		return &n
	}}
)

func shard() (*recordShard, *int) {
	tok := shardTokens.Get().(*int)
	return &records[*tok], tok
}

func getRecord() *exportRecord {
	s, tok := shard()
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		rec := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		shardTokens.Put(tok)
		return rec
	}
	s.mu.Unlock()
	shardTokens.Put(tok)
	rec := &exportRecord{shard: uint8(*tok)}
	rec.handle = newHandle(rec)
	return rec
}

// putRecord returns a record whose export has been claimed (its gen
// already moved on) to the shard it came from, so that exports released on
// another thread (a C consumer's) refill the exporter's shard.
func putRecord(rec *exportRecord) {
	rec.base, rec.size = nil, 0
	s := &records[rec.shard]
	s.mu.Lock()
	if len(s.free) < maxFreeRecords {
		s.free = append(s.free, rec)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	deleteHandle(rec.handle)
}

var (
	goExports     atomic.Int64 // Go-memory exports not yet released
	leakedImports atomic.Int64 // imports released by the cleanup, never closed
)

// releaseExport is called once per Go-memory export, by its C deleter, on
// whatever thread the consumer used. It must not panic: a panic would unwind
// into C. A handle or generation that is not live is counted in
// Stats.BadReleases instead.
func releaseExport(h uintptr, gen uint64) {
	rec, ok := lookupExport(h, gen)
	// Claim the export: of any number of concurrent releases with the same
	// generation, exactly one moves it on.
	if !ok || !rec.gen.CompareAndSwap(gen, gen+1) {
		atomic.AddInt64(badReleases, 1)
		return
	}
	rec.pinner.Unpin()
	putRecord(rec)
	goExports.Add(-1)
}

// releaseGoBlock does in Go what the C deleter of a Go-memory export does
// (claim the block, release the record, free the block), for a tensor this
// package exported and imported back: one C call instead of a call into C
// and a callback into Go.
func releaseGoBlock(block unsafe.Pointer) {
	pre := (*prefix)(block)
	if pre.magic != magicGo {
		atomic.AddInt64(badReleases, 1)
		return
	}
	pre.magic = magicDead
	releaseExport(uintptr(pre.handle), pre.gen)
	cFree(block)
}

// lookupExport returns the record behind h if its current export has
// generation gen, without panicking on a handle that is invalid.
func lookupExport(h uintptr, gen uint64) (rec *exportRecord, ok bool) {
	if h == 0 {
		return nil, false
	}
	defer func() {
		if recover() != nil {
			rec, ok = nil, false
		}
	}()
	rec, ok = handleValue(h).(*exportRecord)
	if !ok || rec.gen.Load() != gen {
		return nil, false
	}
	return rec, true
}

// Outstanding returns how many tensors exported by this package (Go memory
// and Buffers) have not yet been released by their consumers. It is the
// number to watch for leaks: after every consumer is done it is 0.
func Outstanding() int64 {
	return goExports.Load() + atomic.LoadInt64(bufferExports)
}

// Stats are the package's counters, for tests and leak monitoring.
type Stats struct {
	GoExports     int64 // Go-memory exports not yet released
	BufferExports int64 // Buffer exports not yet released
	LeakedImports int64 // imported tensors released by the cleanup because nobody closed them
	BadReleases   int64 // deleter calls on a struct that was not live (a second call, or not ours)
	CBlocks       int64 // C allocations of this package not yet freed (export blocks and buffers)
}

// ReadStats returns the current counters.
func ReadStats() Stats {
	return Stats{
		GoExports:     goExports.Load(),
		BufferExports: atomic.LoadInt64(bufferExports),
		LeakedImports: leakedImports.Load(),
		BadReleases:   atomic.LoadInt64(badReleases),
		CBlocks:       atomic.LoadInt64(liveBlocks),
	}
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

// plan is a checked export: geometry inside the data, flags, first element.
type plan struct {
	layout
	flags Flags
	first int // index of the first element in the data
}

// planExport checks shape and options against a buffer of n elements.
func planExport(n int, shape []int64, opts []ExportOption, legacy bool, dims []int64) (plan, error) {
	var p plan
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
	if len(shape) > MaxNDim {
		return p, fieldErr(ErrNDim, "ndim", len(shape), "must be 0.."+strconv.Itoa(MaxNDim))
	}
	if strides != nil && len(strides) != len(shape) {
		return p, fieldErr(ErrStrides, "strides", clone(strides), "want "+strconv.Itoa(len(shape))+" strides for the shape")
	}
	if legacy && p.flags&FlagReadOnly != 0 {
		return p, fieldErr(ErrReadOnly, "flags", FlagReadOnly, "legacy tensors cannot signal read-only; export versioned")
	}
	var err error
	if p.layout, err = checkGeometry(shape, strides, dims, ""); err != nil {
		return p, err
	}
	if p.numel > 0 {
		lo, loOK := addCheck(int64(p.first), p.minOff)
		hi, hiOK := addCheck(int64(p.first), p.maxOff)
		if p.first < 0 || !loOK || !hiOK || lo < 0 || hi >= int64(n) {
			return p, fieldErr(ErrShape, "shape", clone(shape),
				"with strides "+formatInts(p.strides)+" and offset "+strconv.Itoa(p.first)+
					" the tensor reaches elements "+strconv.FormatInt(lo, 10)+".."+strconv.FormatInt(hi, 10)+
					" of a slice of length "+strconv.Itoa(n))
		}
	}
	return p, nil
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

// writeBlock allocates the C block (prefix, managed struct, shape, strides)
// and fills it. It returns the address of the managed struct, or nil.
func writeBlock(legacy bool, pre prefix, ctx, deleter, data uintptr, dt DataType, p *plan) unsafe.Pointer {
	hdr := unsafe.Sizeof(ManagedTensorVersioned{})
	if legacy {
		hdr = unsafe.Sizeof(ManagedTensor{})
	}
	n := uintptr(p.ndim)
	block := cMalloc(unsafe.Sizeof(prefix{}) + hdr + 16*n)
	if block == nil {
		return nil
	}
	*(*prefix)(block) = pre
	m := unsafe.Add(block, unsafe.Sizeof(prefix{}))
	t := Tensor{Data: data, Device: CPUDevice, NDim: int32(n), DType: dt}
	if n > 0 {
		dims := unsafe.Slice((*int64)(unsafe.Add(m, hdr)), 2*n)
		copy(dims, p.shape)
		copy(dims[n:], p.strides)
		t.Shape, t.Strides = &dims[0], &dims[n]
	}
	if legacy {
		*(*ManagedTensor)(m) = ManagedTensor{DLTensor: t, ManagerCtx: ctx, Deleter: deleter}
	} else {
		*(*ManagedTensorVersioned)(m) = ManagedTensorVersioned{Version: CurrentVersion, ManagerCtx: ctx,
			Deleter: deleter, Flags: p.flags, DLTensor: t}
	}
	return m
}

// exportGo lends n elements of Go memory at base (elemSize bytes each) to C.
func exportGo(base unsafe.Pointer, n, capBytes uintptr, elemSize uintptr, dt DataType, shape []int64, opts []ExportOption, legacy bool) (unsafe.Pointer, error) {
	if !cgoEnabled {
		return nil, ErrCgoRequired
	}
	var dims [16]int64
	p, err := planExport(int(n), shape, opts, legacy, dims[:])
	if err != nil {
		return nil, err
	}
	rec := getRecord()
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
	m := writeBlock(legacy, prefix{handle: uint64(rec.handle), gen: rec.gen.Load(), magic: magicGo}, rec.handle, deleter, data, dt, &p)
	if m == nil {
		rec.pinner.Unpin()
		rec.gen.Add(1)
		putRecord(rec)
		return nil, ErrNoMemory
	}
	goExports.Add(1)
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

// ---- Buffers: memory the package allocates outside the Go heap -------------

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
func NewBuffer[T Element](shape ...int64) (*Buffer[T], error) {
	if !cgoEnabled {
		return nil, ErrCgoRequired
	}
	if len(shape) > MaxNDim {
		return nil, fieldErr(ErrNDim, "ndim", len(shape), "must be 0.."+strconv.Itoa(MaxNDim))
	}
	l, err := checkGeometry(shape, nil, nil, "")
	if err != nil {
		return nil, err
	}
	var z T
	nbytes, ok := mulCheck(l.numel, int64(unsafe.Sizeof(z)))
	if !ok || uint64(nbytes) > uint64(^uintptr(0)>>1)-2*bufferAlign {
		return nil, fieldErr(ErrOverflow, "shape", clone(shape), "buffer size overflows")
	}
	ctl := cBufferAlloc(uint64(nbytes))
	if ctl == nil {
		return nil, fieldErr(ErrNoMemory, "shape", clone(shape), strconv.FormatInt(nbytes, 10)+" bytes")
	}
	b := &Buffer[T]{ctl: ctl, shape: l.shape}
	if l.numel > 0 {
		b.data = unsafe.Slice((*T)(unsafe.Add(ctl, bufferDataOffset)), l.numel)
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
	var dims [16]int64
	p, err := planExport(len(b.data), shape, opts, legacy, dims[:])
	if err != nil {
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
	m := writeBlock(legacy, prefix{handle: uint64(uintptr(b.ctl)), magic: magicBuffer}, uintptr(b.ctl), deleter, data, DataTypeOf[T](), &p)
	if m == nil {
		atomic.AddInt64(&ctl.refs, -1)
		return nil, ErrNoMemory
	}
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
