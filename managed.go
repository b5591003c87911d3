package dlpack

import (
	"runtime"
	"strconv"
	"structs"
	"sync"
	"sync/atomic"
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

// exportRecord is the Go owner of one outstanding Go-memory export. Each
// record has a permanent handle (registry.go), which goes into manager_ctx
// and the block's prefix and keeps the record reachable (the handle table
// is a GC root); the record keeps the data reachable and pinned until the deleter.
// Records are recycled, handle and all, so an export costs no handle
// allocation; gen, written into each block's prefix and moved on by the
// release that claims it, makes a stale or repeated deleter call unable to
// release the record or its next export.
type exportRecord struct {
	pinner runtime.Pinner
	base   unsafe.Pointer // start of the exported Go object; nil for empty tensors
	size   uintptr        // bytes of the exported slice's backing array
	handle uintptr        // this record's handle, set once by newHandle
	gen    atomic.Uint64  // generation of the current export; a release claims it by CAS
	shard  uint8          // the free-list shard it returns to
	// block is the record's own C block (keptBlockSize bytes: prefix,
	// managed struct, shape and strides for up to keptNDim dimensions),
	// allocated at its first export and reused by every later one, so
	// that an export needs no malloc and a release no free. Set once.
	block unsafe.Pointer
	// owner is a described export's Owner (Produce), kept until the
	// release and then released.
	owner any
}

// keptNDim is the most dimensions a record's own block holds; exports with
// more get a one-off block that their deleter frees.
const keptNDim = 8

// keptBlockSize is the size of a record's own block.
const keptBlockSize = unsafe.Sizeof(prefix{}) + unsafe.Sizeof(ManagedTensorVersioned{}) + 16*keptNDim

// maxFreeRecords bounds the records kept for reuse, per shard: a
// high-water mark of exports outstanding at once (a record is ~100 bytes
// plus its handle-table entry, and keeps its 232-byte C block). Beyond it
// a released record's handle is deleted, its block freed and the record
// left to the GC.
const maxFreeRecords = 4096

// The free list is sharded so that exports on different cores do not
// contend on one lock. A goroutine finds "its" shard by stackSlot: one
// that exports again finds the record it released there. The records
// themselves cannot live in a sync.Pool: the GC empties pools, and a
// record dropped that way would stay in the handle table forever.
const (
	recordShardBits = 4
	recordShards    = 1 << recordShardBits
)

type recordShard struct {
	// The padding before and after keeps two shards' fields at least a
	// cache line apart whatever the array's alignment (a shard that
	// straddled a line boundary shared it with its neighbour, and
	// exports on two cores slowed down instead of scaling).
	_ [64]byte
	// hot holds the most recently released record: the common
	// export-release-export cycle takes and returns it with one atomic
	// swap each, without the lock.
	hot atomic.Pointer[exportRecord]
	// exports counts the outstanding exports of this shard's records: a
	// counter per shard, on the line the exporter touches anyway, rather
	// than one that every core's exports and releases would fight over.
	exports atomic.Int64
	mu      sync.Mutex
	free    []*exportRecord
	// ring delays the reuse of released records: a record waits here
	// until reuseDelay more of its shard's exports have been released, so
	// that a consumer's second deleter call within that window finds its
	// export already claimed (refused and counted) instead of a newer
	// export in the same block.
	ring    [reuseDelay]atomic.Pointer[exportRecord]
	ringPos atomic.Uint32
	_       [64]byte
}

// reuseDelay is how many releases of a shard a released record waits
// before it can serve another export.
const reuseDelay = 8

// exportCount is the number of Go-memory exports not yet released, kept
// per shard.
type exportCount struct{}

func (exportCount) add(rec *exportRecord, d int64) { records[rec.shard].exports.Add(d) }

func (exportCount) Load() int64 {
	var n int64
	for i := range records {
		n += records[i].exports.Load()
	}
	return n
}

var records [recordShards]recordShard

// stackSlot picks one of 2^bits slots for the calling goroutine, by the
// address sp of a variable on its stack (goroutine stacks are at least
// 8 KiB apart, so the bits above 13 tell them apart): a goroutine keeps
// finding the same slot, and goroutines running at once mostly find
// different ones, so that no cache line goes back and forth between them.
// The export records' shards and the spare import states are picked so.
func stackSlot(sp unsafe.Pointer, bits uint) int {
	return int(uint64(uintptr(sp)>>13) * 0x9E3779B97F4A7C15 >> (64 - bits))
}

func getRecord() *exportRecord {
	var sp byte
	i := stackSlot(unsafe.Pointer(&sp), recordShardBits)
	s := &records[i]
	if rec := s.hot.Swap(nil); rec != nil {
		return rec
	}
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		rec := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return rec
	}
	s.mu.Unlock()
	rec := &exportRecord{shard: uint8(i)}
	if newHandle(rec) == 0 {
		return nil // every handle is taken: as out of memory
	}
	return rec
}

// putRecord returns a record whose export has been claimed (its gen
// already moved on) to the shard it came from, so that exports released on
// another thread (a C consumer's) refill the exporter's shard.
func putRecord(rec *exportRecord) {
	rec.base, rec.size, rec.owner = nil, 0, nil
	s := &records[rec.shard]
	if rec = s.ring[s.ringPos.Add(1)%reuseDelay].Swap(rec); rec == nil {
		return
	}
	if s.hot.CompareAndSwap(nil, rec) {
		return
	}
	s.mu.Lock()
	if len(s.free) < maxFreeRecords {
		s.free = append(s.free, rec)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	deleteHandle(rec.handle)
	if rec.block != nil {
		cKeptFree(rec.block)
	}
}

var (
	goExports     exportCount  // Go-memory exports not yet released
	oneOffExports atomic.Int64 // those of them in a one-off block (ndim above keptNDim)
	leakedImports atomic.Int64 // imports released by the cleanup, never closed
)

// releaseExport is called once per Go-memory export, by its C deleter, on
// whatever thread the consumer used; block is the export's C block (its
// prefix). It reports whether the caller must free the block: true for a
// one-off block, false for the record's own, which stays with the record.
// It must not panic: a panic would unwind into C. A handle or generation
// that is not live is counted in Stats.BadReleases instead, and a block
// that may be a record's own is then left alone.
func releaseExport(h uintptr, gen uint64, block unsafe.Pointer) (freeBlock bool) {
	rec := recordOf(h)
	if rec == nil {
		atomic.AddInt64(badReleases, 1)
		return false
	}
	return releaseRecord(rec, gen, block)
}

// releaseRecord is releaseExport once the record is known.
func releaseRecord(rec *exportRecord, gen uint64, block unsafe.Pointer) (freeBlock bool) {
	kept := block == rec.block
	// Claim the export: of any number of concurrent releases with the same
	// generation, exactly one moves it on.
	if !rec.gen.CompareAndSwap(gen, gen+1) {
		atomic.AddInt64(badReleases, 1)
		return false
	}
	rec.pinner.Unpin()
	if !kept {
		oneOffExports.Add(-1)
	}
	o := rec.owner
	goExports.add(rec, -1)
	putRecord(rec)
	releaseOwner(o)
	return !kept
}

// releaseGoBlock does in Go what the C deleter of a Go-memory export does,
// for a tensor this package exported and imported back (rec is its record,
// looked up by the import): no call into C and back, and none at all for
// a record's own block.
func releaseGoBlock(block unsafe.Pointer, rec *exportRecord) {
	pre := (*prefix)(block)
	if pre.magic != magicGo {
		atomic.AddInt64(badReleases, 1)
		return
	}
	pre.magic = magicDead
	if releaseRecord(rec, pre.gen, block) {
		cFree(block)
	}
}

// recordOf returns the record behind handle h, or nil for a handle that is
// not one of ours.
func recordOf(h uintptr) *exportRecord { return handleValue(h) }

// lookupExport returns the record behind h if its current export has
// generation gen.
func lookupExport(h uintptr, gen uint64) (rec *exportRecord, ok bool) {
	if rec = recordOf(h); rec == nil || rec.gen.Load() != gen {
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
	CBlocks       int64 // C allocations of this package in use: blocks of outstanding exports, and buffers
	KeptBlocks    int64 // C blocks that idle export records keep for their next export (bounded by the free list)
}

// ReadStats returns the current counters. Each is read atomically, but not
// all at the same instant.
func ReadStats() Stats {
	// Records' own blocks are counted by allocation only (keptBlocks), so
	// the export hot path updates no block counter: those in use are the
	// Go exports not in one-off blocks.
	inUse := goExports.Load() - oneOffExports.Load()
	kept := atomic.LoadInt64(keptBlocks)
	return Stats{
		GoExports:     goExports.Load(),
		BufferExports: atomic.LoadInt64(bufferExports),
		LeakedImports: leakedImports.Load(),
		BadReleases:   atomic.LoadInt64(badReleases),
		CBlocks:       atomic.LoadInt64(liveBlocks) + inUse,
		KeptBlocks:    kept - inUse,
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

// recordAndBlock takes an export record and the C block for an export of
// ndim dimensions: the record's own, or a one-off block (oneOff) for more
// than keptNDim. A nil block means out of memory; the record is then
// already back on its free list.
func recordAndBlock(legacy bool, ndim int) (rec *exportRecord, block unsafe.Pointer, oneOff bool) {
	rec = getRecord()
	if rec == nil {
		return nil, nil, false
	}
	oneOff = ndim > keptNDim
	if oneOff {
		block = newBlock(legacy, ndim)
	} else {
		if rec.block == nil {
			rec.block = cKeptAlloc(keptBlockSize)
		}
		block = rec.block
	}
	if block == nil {
		putRecord(rec)
		return nil, nil, false
	}
	return rec, block, oneOff
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
