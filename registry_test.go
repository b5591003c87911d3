//go:build cgo

package dlpack

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestRegistryConcurrencyPureGo drives the export registry (handle, record,
// Pinner, pool) from many goroutines with no cgo call in between, because
// every cgo crossing is a happens-before edge that hides races from -race.
// Each export is released once by a different goroutine than made it, and
// a second release of the same handle must be refused and counted.
func TestRegistryConcurrencyPureGo(t *testing.T) {
	const goroutines, per = 8, 500
	handles := make(chan uintptr, 256)
	badBefore := atomic.LoadInt64(badReleases)
	outBefore := goExports.Load()
	var made, released sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		made.Add(1)
		go func() {
			defer made.Done()
			for i := 0; i < per; i++ {
				data := make([]float64, 8)
				rec := recordPool.Get().(*exportRecord)
				base := unsafe.Pointer(unsafe.SliceData(data))
				rec.pinner.Pin(base)
				rec.base, rec.size = base, 64
				goExports.Add(1)
				handles <- newHandle(rec)
			}
		}()
	}
	var doubles atomic.Int64
	for g := 0; g < goroutines; g++ {
		released.Add(1)
		go func() {
			defer released.Done()
			for h := range handles {
				releaseExport(h)
				if h%7 == 0 {
					releaseExport(h) // a second deleter call: refused, counted
					doubles.Add(1)
				}
			}
		}()
	}
	made.Wait()
	close(handles)
	released.Wait()
	if got := goExports.Load(); got != outBefore {
		t.Fatalf("outstanding %d, want %d", got, outBefore)
	}
	if got := atomic.LoadInt64(badReleases) - badBefore; got != doubles.Load() {
		t.Fatalf("bad releases %d, want %d", got, doubles.Load())
	}
}
