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
// a tensor GoMLX has finalized. Each ordering is first taken on purpose
// and checked to the end, then the two race 2000 times (run under
// -race, where the check and the finalization must not touch the tensor
// at the same time either), each outcome checked as its ordering was.
func TestExportRacesFinalizeAll(t *testing.T) {
	b := newBackend(t)
	fresh := func(t *testing.T) (*tensors.Tensor, *dlgomlx.Tensor) {
		t.Helper()
		x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{4}), b) // a simplego buffer
		if err != nil {
			t.Fatal(err)
		}
		e, err := dlgomlx.FromTensor(x)
		if err != nil {
			t.Fatal(err)
		}
		return x, e
	}
	// The export won: FinalizeAll left x to its consumer, who reads it,
	// and x is finalized at the consumer's release.
	won := func(t *testing.T, x *tensors.Tensor, f dlpack.Foreign) {
		t.Helper()
		if !x.Ok() || dlgomlx.Exports(x) != 1 {
			t.Fatalf("the tensor was finalized under a consumer that holds its memory (ok %v, exports %d)", x.Ok(), dlgomlx.Exports(x))
		}
		if v, err := dlpack.ReadOnlySlice[float32](f); err != nil || v[3] != 4 {
			t.Fatalf("%v %v", v, err)
		}
		f.Close()
		if x.Ok() || dlgomlx.Exports(x) != 0 {
			t.Fatalf("after the release: ok %v, exports %d", x.Ok(), dlgomlx.Exports(x))
		}
	}
	// FinalizeAll won: the export is refused and x is finalized.
	lost := func(t *testing.T, x *tensors.Tensor, err error) {
		t.Helper()
		if !errors.Is(err, dlgomlx.ErrTensor) {
			t.Fatalf("the export of a finalized tensor: %v", err)
		}
		if x.Ok() || dlgomlx.Exports(x) != 0 {
			t.Fatalf("ok %v, exports %d", x.Ok(), dlgomlx.Exports(x))
		}
	}
	t.Run("export first", func(t *testing.T) {
		x, e := fresh(t)
		f, err := dlpack.From(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := dlgomlx.FinalizeAll(x); err != nil {
			t.Fatal(err)
		}
		won(t, x, f)
	})
	t.Run("FinalizeAll first", func(t *testing.T) {
		x, e := fresh(t)
		if err := dlgomlx.FinalizeAll(x); err != nil {
			t.Fatal(err)
		}
		_, err := dlpack.From(e)
		lost(t, x, err)
	})
	t.Run("racing", func(t *testing.T) {
		exportFirst, finalizeFirst := 0, 0
		for range 2000 {
			x, e := fresh(t)
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
				lost(t, x, fromErr)
				finalizeFirst++
			} else {
				won(t, x, f)
				exportFirst++
			}
		}
		t.Logf("export first %d times, FinalizeAll first %d times", exportFirst, finalizeFirst)
	})
	if dlpack.Outstanding() != 0 {
		t.Fatalf("%d outstanding", dlpack.Outstanding())
	}
}

// FromTensor and CopyFromTensor racing FinalizeAll: an error wrapping
// ErrTensor or a Tensor, never a panic (GoMLX's accessors panic on a
// tensor finalized under them) nor memory of a finalized tensor. Each
// ordering is first taken on purpose, for each of the two, then they
// race 2000 times, each outcome checked as its ordering was.
func TestFromTensorRacesFinalizeAll(t *testing.T) {
	b := newBackend(t)
	fresh := func(t *testing.T) *tensors.Tensor {
		t.Helper()
		x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{4}), b)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	from := func(t *testing.T, x *tensors.Tensor, copied bool) (e *dlgomlx.Tensor, err error) {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("panic: %v", r)
			}
		}()
		if copied {
			return dlgomlx.CopyFromTensor(x)
		}
		return dlgomlx.FromTensor(x)
	}
	// The Tensor was made first: once x is finalized, a copy still
	// exports its values and a shared one refuses.
	made := func(t *testing.T, e *dlgomlx.Tensor, copied bool) {
		t.Helper()
		if e.Copied() != copied {
			t.Fatalf("Copied() %v from %s", e.Copied(), map[bool]string{false: "FromTensor", true: "CopyFromTensor"}[copied])
		}
		f, err := dlpack.From(e)
		switch {
		case copied && err != nil:
			t.Fatalf("the copy of a finalized tensor: %v", err)
		case copied:
			if v, err := dlpack.ReadOnlySlice[float32](f); err != nil || v[3] != 4 {
				t.Fatalf("%v %v", v, err)
			}
			f.Close()
		case err == nil:
			f.Close()
			t.Fatal("an export of a finalized tensor")
		case !errors.Is(err, dlgomlx.ErrTensor):
			t.Fatal(err)
		}
	}
	// FinalizeAll came first: the error wraps ErrTensor.
	refused := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, dlgomlx.ErrTensor) {
			t.Fatalf("from a finalized tensor: %v", err)
		}
	}
	finalized := func(t *testing.T, x *tensors.Tensor) {
		t.Helper()
		if x.Ok() || dlgomlx.Exports(x) != 0 {
			t.Fatalf("at the end: ok %v, exports %d", x.Ok(), dlgomlx.Exports(x))
		}
	}
	for _, copied := range []bool{false, true} {
		name := map[bool]string{false: "FromTensor", true: "CopyFromTensor"}[copied]
		t.Run(name+" first", func(t *testing.T) {
			x := fresh(t)
			e, err := from(t, x, copied)
			if err != nil {
				t.Fatal(err)
			}
			if err := dlgomlx.FinalizeAll(x); err != nil {
				t.Fatal(err)
			}
			finalized(t, x)
			made(t, e, copied)
		})
		t.Run("FinalizeAll first, "+name, func(t *testing.T) {
			x := fresh(t)
			if err := dlgomlx.FinalizeAll(x); err != nil {
				t.Fatal(err)
			}
			_, err := from(t, x, copied)
			refused(t, err)
			finalized(t, x)
		})
	}
	t.Run("racing", func(t *testing.T) {
		for i := range 2000 {
			x := fresh(t)
			copied := i%2 == 1
			start := make(chan struct{})
			var (
				e       *dlgomlx.Tensor
				fromErr error
				wg      sync.WaitGroup
			)
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				e, fromErr = from(t, x, copied)
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
				refused(t, fromErr)
			} else {
				made(t, e, copied)
			}
			finalized(t, x)
		}
	})
	if dlpack.Outstanding() != 0 {
		t.Fatalf("%d outstanding", dlpack.Outstanding())
	}
}
