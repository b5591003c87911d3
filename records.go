package dlpack

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

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
