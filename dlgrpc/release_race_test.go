//go:build cgo

package dlgrpc

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack"
)

// TestReleaseRacesDLPack: a Tensor released while another goroutine
// exports it (shared, or copied for a misaligned body) frees its body
// exactly once, and the export either succeeds on live memory or fails
// with dlpack.ErrClosed.
func TestReleaseRacesDLPack(t *testing.T) {
	const rounds = 20000
	body := dlpack.AlignedSlice[byte](4*64 + 64)
	for _, off := range []int{0, 8} {
		var doubles, used atomic.Int32
		for range rounds {
			var released atomic.Int32
			freed := atomic.Bool{}
			tn, err := NewTensor(dlpack.Float32, []int64{64}, body[off:off+4*64], false, func() {
				if released.Add(1) > 1 {
					doubles.Add(1)
				}
				freed.Store(true)
			})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				tn.Close()
			}()
			go func() {
				defer wg.Done()
				<-start
				runtime.Gosched()
				m, err := tn.DLPack(dlpack.Request{})
				if err != nil {
					if !errors.Is(err, dlpack.ErrClosed) {
						t.Errorf("DLPack: %v", err)
					}
					return
				}
				if freed.Load() && m.Versioned.Flags&dlpack.FlagIsCopied == 0 {
					used.Add(1) // a shared export of freed memory
				}
				m.Close()
			}()
			close(start)
			wg.Wait()
			if released.Load() != 1 {
				t.Fatalf("offset %d: body released %d times", off, released.Load())
			}
		}
		if doubles.Load() != 0 || used.Load() != 0 {
			t.Fatalf("offset %d: %d double releases, %d exports of freed memory in %d rounds", off, doubles.Load(), used.Load(), rounds)
		}
	}
}

// TestReleaseBetweenCheckAndHold: the Release lands exactly between the
// export's check of the Tensor and its taking a reference (acquireHook),
// the window the concurrent test above can only hope to hit.
func TestReleaseBetweenCheckAndHold(t *testing.T) {
	body := dlpack.AlignedSlice[byte](4*64 + 64)
	for _, off := range []int{0, 8} {
		released := 0
		tn, err := NewTensor(dlpack.Float32, []int64{64}, body[off:off+4*64], false, func() { released++ })
		if err != nil {
			t.Fatal(err)
		}
		acquireHook = func() { tn.Close() }
		m, err := tn.DLPack(dlpack.Request{})
		acquireHook = nil
		if err == nil {
			m.Close()
			t.Errorf("offset %d: DLPack of a Tensor released meanwhile succeeded", off)
		} else if !errors.Is(err, dlpack.ErrClosed) {
			t.Errorf("offset %d: DLPack: %v, want ErrClosed", off, err)
		}
		if released != 1 {
			t.Errorf("offset %d: body released %d times", off, released)
		}
	}
}
