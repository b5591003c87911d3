//go:build cgo

package dlpack_test

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// After a burst of exports, the idle records keep their C blocks until
// ReleaseIdle frees them; exports and releases work as before afterwards.
func TestReleaseIdle(t *testing.T) {
	dlpack.ReleaseIdle()
	if kept := dlpack.ReadStats().KeptBlocks; kept != 0 {
		t.Fatalf("KeptBlocks = %d right after ReleaseIdle, want 0", kept)
	}
	xs := make([]float32, 16)
	const burst = 3000
	ms := make([]unsafe.Pointer, burst)
	for i := range ms {
		m, err := dlpack.Export(xs, []int64{4, 4})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = unsafe.Pointer(m)
	}
	// One held export survives ReleaseIdle untouched.
	held := ms[burst-1]
	cshim.ReleaseOnThreads(ms[:burst-1], 4, false)
	kept := dlpack.ReadStats().KeptBlocks
	if kept < burst/2 {
		t.Fatalf("KeptBlocks = %d after a burst of %d exports, want most of them", kept, burst)
	}
	if n := dlpack.ReleaseIdle(); int64(n) != kept {
		t.Fatalf("ReleaseIdle released %d records, KeptBlocks was %d", n, kept)
	}
	if st := dlpack.ReadStats(); st.KeptBlocks != 0 || st.GoExports != 1 {
		t.Fatalf("after ReleaseIdle: KeptBlocks %d, GoExports %d; want 0 and the held export", st.KeptBlocks, st.GoExports)
	}
	if got := cshim.SumVersioned(held); got != 0 {
		t.Fatalf("the held export reads %v, want 0", got)
	}
	bad := dlpack.ReadStats().BadReleases
	cshim.ReleaseVersioned(held)
	if dlpack.Outstanding() != 0 || dlpack.ReadStats().BadReleases != bad {
		t.Fatalf("releasing the held export: outstanding %d, bad releases %d -> %d", dlpack.Outstanding(), bad, dlpack.ReadStats().BadReleases)
	}
	// Exporting again allocates afresh.
	m, err := dlpack.Export(xs, []int64{16})
	if err != nil {
		t.Fatal(err)
	}
	if got := cshim.SumVersioned(unsafe.Pointer(m)); got != 0 {
		t.Fatalf("a new export reads %v", got)
	}
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	dlpack.ReleaseIdle()
	if st := dlpack.ReadStats(); st.KeptBlocks != 0 || st.CBlocks != 0 || dlpack.Outstanding() != 0 {
		t.Fatalf("at the end: %+v, outstanding %d", st, dlpack.Outstanding())
	}
}

// ReleaseIdle running while goroutines export and C releases: every
// export still reads its own data and is released once, and nothing of
// the records in use is freed.
func TestReleaseIdleConcurrent(t *testing.T) {
	done := make(chan struct{})
	trimmed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				trimmed <- n
				return
			default:
				n += dlpack.ReleaseIdle()
			}
		}
	}()
	errs := make(chan string, 4)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := []float32{float32(g), 1, 2, 3}
			held := make([]unsafe.Pointer, 0, 16)
			for i := 0; i < 2000; i++ {
				m, err := dlpack.Export(xs, []int64{4})
				if err != nil {
					errs <- err.Error()
					return
				}
				held = append(held, unsafe.Pointer(m))
				if len(held) == cap(held) || i == 1999 {
					for _, p := range held {
						if got := cshim.SumVersioned(p); got != float64(g)+6 {
							errs <- fmt.Sprintf("goroutine %d: an export reads %v, want %v", g, got, float64(g)+6)
							return
						}
					}
					cshim.ReleaseOnThreads(held, 2, false)
					held = held[:0]
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	n := <-trimmed
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if dlpack.Outstanding() != 0 {
		t.Fatalf("Outstanding = %d", dlpack.Outstanding())
	}
	dlpack.ReleaseIdle()
	if st := dlpack.ReadStats(); st.KeptBlocks != 0 || st.CBlocks != 0 {
		t.Fatalf("after the run: %+v", st)
	}
	t.Logf("ReleaseIdle released %d idle records during the run", n)
}
