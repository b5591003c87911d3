//go:build cgo

package dlgomlx_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Goroutines export one tensor and release their tensors concurrently
// (Go to Go and through C blocks) while FinalizeAll is called: exports
// after it are refused with ErrTensor, the counts stay exact, and the
// tensor is finalized once, after the last release. Run under -race.
func TestConcurrentExports(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4}, 4)
	e, err := dlgomlx.FromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := dlpack.From(e) // keeps x alive until the end
	if err != nil {
		t.Fatal(err)
	}
	var finalizing atomic.Bool
	var ops atomic.Int64
	refused := func(err error) bool { return errors.Is(err, dlgomlx.ErrTensor) && finalizing.Load() }
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				ops.Add(1)
				if (g+i)%2 == 0 {
					f, err := dlpack.From(e)
					if refused(err) {
						return
					} else if err != nil {
						t.Error(err)
						return
					}
					if v, err := dlpack.ReadOnlySlice[float32](f); err != nil || v[3] != 4 {
						t.Errorf("%v %v", v, err)
					}
					f.Close()
				} else {
					m, err := e.DLPack(dlpack.DefaultRequest())
					if refused(err) {
						return
					} else if err != nil {
						t.Error(err)
						return
					}
					m.Release()
				}
			}
		}()
	}
	for ops.Load() < 1000 { // finalize in the middle of the exchanges
		runtime.Gosched()
	}
	finalizing.Store(true)
	if err := dlgomlx.FinalizeAll(x); err != nil { // waits for hold and the goroutines' tensors
		t.Fatal(err)
	}
	wg.Wait()
	if !x.Ok() || dlgomlx.Exports(x) != 1 {
		t.Fatalf("ok %v, exports %d with one holder left", x.Ok(), dlgomlx.Exports(x))
	}
	hold.Close()
	if x.Ok() || dlgomlx.Exports(x) != 0 || dlpack.Outstanding() != 0 {
		t.Fatalf("after the last release: ok %v, exports %d, outstanding %d", x.Ok(), dlgomlx.Exports(x), dlpack.Outstanding())
	}
}
