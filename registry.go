package dlpack

import (
	"sync"
	"sync/atomic"
)

// ---- The export registry ---------------------------------------------------
//
// Each export record has a handle for its whole life, the value that
// manager_ctx and its blocks' prefix carry; the deleter turns it back into
// the record here. The table is a GC root (a package variable), so a
// record with a handle stays reachable, as with runtime/cgo.Handle, which
// this replaces: cgo.Handle's lookup is a sync.Map read (about 20 ns on
// every release) and panics on a handle it does not know. Here a lookup is
// two loads and a comparison, and anything that is not a live handle reads
// as nil.
//
// A handle is the slot's index + 1 in its low handleIdxBits bits and the
// slot's reuse count above them, so that a handle kept after its record
// was deleted does not name a later record in the same slot: the lookup
// compares the whole handle with the record's own.

const (
	// handleIdxBits bits index the slots: 2^28 - 1 records at once on
	// 64-bit platforms, 2^20 - 1 on 32-bit ones.
	handleIdxBits = 20 + 8*(^uintptr(0)>>63)
	handleIdxMask = 1<<handleIdxBits - 1
	// Slots come in chunks allocated on first use.
	handleChunkBits = 14
	handleChunkSize = 1 << handleChunkBits
	handleChunks    = 1 << (handleIdxBits - handleChunkBits)
)

type handleChunk struct {
	recs  [handleChunkSize]atomic.Pointer[exportRecord]
	reuse [handleChunkSize]uint32 // times the slot was given out, under handles.mu
}

var handles struct {
	chunks [handleChunks]atomic.Pointer[handleChunk]
	mu     sync.Mutex
	next   uint32   // slots below it have been given out, under mu
	free   []uint32 // deleted slots, under mu
}

// newHandle registers rec and returns its handle, or 0 if every slot is
// taken.
func newHandle(rec *exportRecord) uintptr {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var i uint32
	if n := len(handles.free); n > 0 {
		i, handles.free = handles.free[n-1], handles.free[:n-1]
	} else {
		if handles.next == handleIdxMask {
			return 0
		}
		i = handles.next
		handles.next++
	}
	ch := handles.chunks[i>>handleChunkBits].Load()
	if ch == nil {
		ch = new(handleChunk)
		handles.chunks[i>>handleChunkBits].Store(ch)
	}
	j := i & (handleChunkSize - 1)
	ch.reuse[j]++
	h := uintptr(ch.reuse[j])<<handleIdxBits | uintptr(i+1)
	rec.handle = h
	ch.recs[j].Store(rec)
	return h
}

// handleValue returns the record whose handle is h, or nil if h is not
// the handle of a live record.
func handleValue(h uintptr) *exportRecord {
	i := h&handleIdxMask - 1 // 0 wraps around and fails the bound
	if i >= handleIdxMask {
		return nil
	}
	ch := handles.chunks[i>>handleChunkBits].Load()
	if ch == nil {
		return nil
	}
	rec := ch.recs[i&(handleChunkSize-1)].Load()
	if rec == nil || rec.handle != h {
		return nil
	}
	return rec
}

// deleteHandle unregisters the record whose handle is h; its slot can be
// given to a later record, under a new handle.
func deleteHandle(h uintptr) {
	rec := handleValue(h)
	if rec == nil {
		return
	}
	i := uint32(h&handleIdxMask - 1)
	handles.mu.Lock()
	handles.chunks[i>>handleChunkBits].Load().recs[i&(handleChunkSize-1)].Store(nil)
	handles.free = append(handles.free, i)
	handles.mu.Unlock()
}
