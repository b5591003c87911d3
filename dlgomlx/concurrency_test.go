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
					m, err := e.DLPack(dlpack.Request{})
					if refused(err) {
						return
					} else if err != nil {
						t.Error(err)
						return
					}
					m.Close()
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

// An export and FinalizeAll of a tensor with no consumer race: either
// the export is refused (the tensor was finalized first) or it wins and
// FinalizeAll waits for its release; never a consumer holding memory of
// a tensor GoMLX has finalized. Run under -race, where the check and the
// finalization must not touch the tensor at the same time either.
func TestExportRacesFinalizeAll(t *testing.T) {
	b := newBackend(t)
	won, lost := 0, 0
	for range 2000 {
		x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{4}), b) // a simplego buffer
		if err != nil {
			t.Fatal(err)
		}
		e, err := dlgomlx.FromTensor(x)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var (
			f       dlpack.Foreign
			fromErr error
			wg      sync.WaitGroup
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			f, fromErr = dlpack.From(e)
		}()
		go func() {
			defer wg.Done()
			<-start
			if err := dlgomlx.FinalizeAll(x); err != nil {
				t.Error(err)
			}
		}()
		close(start)
		wg.Wait()
		if fromErr != nil {
			if !errors.Is(fromErr, dlgomlx.ErrTensor) {
				t.Fatal(fromErr)
			}
			lost++
		} else {
			won++
			if !x.Ok() {
				t.Fatal("the tensor was finalized under a consumer that holds its memory")
			}
			f.Close()
		}
		if x.Ok() || dlgomlx.Exports(x) != 0 {
			t.Fatalf("at the end: ok %v, exports %d", x.Ok(), dlgomlx.Exports(x))
		}
	}
	t.Logf("export first %d times, FinalizeAll first %d times", won, lost)
	if dlpack.Outstanding() != 0 {
		t.Fatalf("%d outstanding", dlpack.Outstanding())
	}
}

// FromTensor and CopyFromTensor racing FinalizeAll: an error wrapping
// ErrTensor or a Tensor, never a panic (GoMLX's accessors panic on a
// tensor finalized under them) nor memory of a finalized tensor.
func TestFromTensorRacesFinalizeAll(t *testing.T) {
	b := newBackend(t)
	for i := range 2000 {
		x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{4}), b)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var (
			e       *dlgomlx.Tensor
			fromErr error
			wg      sync.WaitGroup
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("panic: %v", r)
				}
			}()
			<-start
			if i%2 == 0 {
				e, fromErr = dlgomlx.FromTensor(x)
			} else {
				e, fromErr = dlgomlx.CopyFromTensor(x)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if err := dlgomlx.FinalizeAll(x); err != nil {
				t.Error(err)
			}
		}()
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if fromErr != nil {
			if !errors.Is(fromErr, dlgomlx.ErrTensor) {
				t.Fatal(fromErr)
			}
		} else if f, err := dlpack.From(e); err == nil {
			// Only a copy outlives the finalized tensor.
			if !e.Copied() {
				t.Fatal("an export of a finalized tensor")
			}
			if v, err := dlpack.ReadOnlySlice[float32](f); err != nil || v[3] != 4 {
				t.Fatalf("%v %v", v, err)
			}
			f.Close()
		} else if !errors.Is(err, dlgomlx.ErrTensor) {
			t.Fatal(err)
		}
		if x.Ok() || dlgomlx.Exports(x) != 0 {
			t.Fatalf("at the end: ok %v, exports %d", x.Ok(), dlgomlx.Exports(x))
		}
	}
	if dlpack.Outstanding() != 0 {
		t.Fatalf("%d outstanding", dlpack.Outstanding())
	}
}
