//go:build cgo

package dlpack

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// handleGen is what the C deleter of an export passes back: the handle and
// generation in its block's prefix, and the block, here always the
// record's own (nil until a real export gave the record one), as for an
// export of up to keptNDim dimensions.
type handleGen struct {
	h     uintptr
	gen   uint64
	block unsafe.Pointer
}

// TestRegistryConcurrencyPureGo drives the export registry (handles,
// records, Pinners, the free list) from many goroutines with no cgo call in
// between, because every cgo crossing is a happens-before edge that hides
// races from -race. Each export is released once by a different goroutine
// than made it; a second release of the same export (same handle and
// generation) must be refused and counted, even after its record has been
// reused for another export.
func TestRegistryConcurrencyPureGo(t *testing.T) {
	const goroutines, per = 8, 500
	exports := make(chan handleGen, 256)
	badBefore := atomic.LoadInt64(badReleases)
	outBefore := goExports.Load()
	var made, released sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		made.Add(1)
		go func() {
			defer made.Done()
			for i := 0; i < per; i++ {
				data := make([]float64, 8)
				rec := getRecord()
				base := unsafe.Pointer(unsafe.SliceData(data))
				rec.pinner.Pin(base)
				rec.base, rec.size = base, 64
				goExports.add(rec, 1)
				exports <- handleGen{rec.handle, rec.gen.Load(), rec.block}
			}
		}()
	}
	var doubles atomic.Int64
	for g := 0; g < goroutines; g++ {
		released.Add(1)
		go func() {
			defer released.Done()
			for e := range exports {
				releaseExport(e.h, e.gen, e.block)
				if e.h%7 == 0 {
					releaseExport(e.h, e.gen, e.block) // a second deleter call: refused, counted
					doubles.Add(1)
				}
				if e.h%11 == 0 { // two more, racing each other: both refused
					var w sync.WaitGroup
					for k := 0; k < 2; k++ {
						w.Add(1)
						go func() { defer w.Done(); releaseExport(e.h, e.gen, e.block) }()
					}
					w.Wait()
					doubles.Add(2)
				}
			}
		}()
	}
	made.Wait()
	close(exports)
	released.Wait()
	if got := goExports.Load(); got != outBefore {
		t.Fatalf("outstanding %d, want %d", got, outBefore)
	}
	if got := atomic.LoadInt64(badReleases) - badBefore; got != doubles.Load() {
		t.Fatalf("bad releases %d, want %d", got, doubles.Load())
	}
}

// A stale release of a recycled record does not touch its new export.
func TestStaleReleaseOfRecycledRecord(t *testing.T) {
	data := make([]int64, 4)
	rec := getRecord()
	rec.pinner.Pin(unsafe.Pointer(&data[0]))
	goExports.add(rec, 1)
	old := handleGen{rec.handle, rec.gen.Load(), rec.block}
	releaseExport(old.h, old.gen, old.block)

	rec2 := getRecord() // likely the same record, with a new generation
	rec2.pinner.Pin(unsafe.Pointer(&data[0]))
	rec2.base, rec2.size = unsafe.Pointer(&data[0]), 32
	goExports.add(rec2, 1)
	bad := atomic.LoadInt64(badReleases)
	releaseExport(old.h, old.gen, old.block)
	if atomic.LoadInt64(badReleases) != bad+1 {
		t.Fatal("a stale release was not refused")
	}
	if rec2.base == nil {
		t.Fatal("the new export was released by a stale call")
	}
	releaseExport(rec2.handle, rec2.gen.Load(), rec2.block)
	if atomic.LoadInt64(badReleases) != bad+1 {
		t.Fatal("the live release was refused")
	}
}

// TestHandleTable: a handle names its record until it is deleted; a
// deleted handle names nothing, even once its slot serves a later record
// (which gets another handle); values that were never handles, zero
// included, name nothing.
func TestHandleTable(t *testing.T) {
	a, b := new(exportRecord), new(exportRecord)
	ha := newHandle(a)
	if ha == 0 || handleValue(ha) != a || a.handle != ha {
		t.Fatalf("handle %#x names %p, want %p", ha, handleValue(ha), a)
	}
	deleteHandle(ha)
	if handleValue(ha) != nil {
		t.Fatal("a deleted handle still names its record")
	}
	hb := newHandle(b) // reuses a's slot
	if hb == ha || hb&handleIdxMask != ha&handleIdxMask {
		t.Fatalf("handles %#x and %#x: want the same slot under another handle", ha, hb)
	}
	if handleValue(ha) != nil || handleValue(hb) != b {
		t.Fatal("a stale handle names the slot's new record")
	}
	for _, h := range []uintptr{0, handleIdxMask, hb&^handleIdxMask | (handleIdxMask - 1), hb ^ 1<<handleIdxBits, ^uintptr(0)} {
		if handleValue(h) != nil {
			t.Errorf("%#x names a record", h)
		}
	}
	deleteHandle(hb)
	deleteHandle(hb) // a second delete does nothing
	if handleValue(hb) != nil {
		t.Fatal("deleted")
	}
}
