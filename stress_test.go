//go:build cgo

package dlpack_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStressGoroutinesAndForeignThreads runs, all at once: C pthreads
// (created in C) producing tensors for Go; goroutines importing them
// (owned, scoped one by one or in batches, or dropped for the cleanup), handing owners to other
// goroutines and closing them concurrently with the importer; goroutines
// exporting Go slices and Buffers to C pthreads that read and release them
// (each thread exits right after its last release); and Go -> Go round
// trips. Every C-made tensor must be deleted exactly once, every export
// released exactly once, and nothing may be outstanding at the end.
func TestStressGoroutinesAndForeignThreads(t *testing.T) {
	const (
		producers, perProducer, consumers = 4, 1500, 4
		importers, exporters, perExporter = 4, 4, 1500
	)
	if testing.Short() {
		t.Skip("stress")
	}
	leakedBefore := dlpack.ReadStats().LeakedImports
	cshim.StressStart(producers, perProducer, consumers)

	handoff := make(chan dlpack.Foreign, 64)
	var closers sync.WaitGroup
	for i := 0; i < 2; i++ {
		closers.Add(1)
		go func() {
			defer closers.Done()
			for f := range handoff {
				f.Close() // races with the importer's own Close
			}
		}()
	}

	var imported, borrowed, dropped, given, goToGo atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < importers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := g; ; n++ {
				producing := cshim.StressProducing()
				p := cshim.StressTake()
				if p == nil {
					if !producing {
						return
					}
					runtime.Gosched()
					continue
				}
				switch n % 3 {
				case 0:
					f, err := dlpack.Import(p, dlpack.RequireDataType(dlpack.Float32))
					if err != nil {
						t.Error(err)
						return
					}
					xs, err := dlpack.Slice[float32](f)
					if err != nil || len(xs) != 4 || xs[3] != 4 {
						t.Errorf("view %v %v", xs, err)
					}
					handoff <- f
					f.Close()
					imported.Add(1)
				case 1:
					if n%2 == 0 { // a batch: p and up to two more
						ps := []unsafe.Pointer{p}
						for len(ps) < 3 {
							q := cshim.StressTake()
							if q == nil {
								break
							}
							ps = append(ps, q)
						}
						fs := make([]dlpack.Foreign, len(ps))
						err := dlpack.BorrowBatch(ps, fs, func(fs []dlpack.Foreign) error {
							if len(fs) > 1 {
								fs[1].Close() // early, racing nothing but the batch's end
							}
							xs, err := dlpack.ReadOnlySlice[float32](fs[0])
							if err == nil && xs[1] != 2 {
								t.Errorf("batch read %v", xs)
							}
							return err
						})
						if err != nil {
							t.Error(err)
							return
						}
						borrowed.Add(int64(len(ps)))
						break
					}
					err := dlpack.Borrow(p, func(f dlpack.Foreign) error {
						v, err := dlpack.ViewOf[float32](f)
						if err == nil {
							var x float32
							if x, err = v.At(0); x != 1 {
								t.Errorf("At(0) = %v", x)
							}
						}
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
					borrowed.Add(1)
				case 2:
					if _, err := dlpack.Import(p); err != nil { // never closed: the cleanup releases it
						t.Error(err)
						return
					}
					dropped.Add(1)
				}
			}
		}(g)
	}

	var exp sync.WaitGroup
	for g := 0; g < exporters; g++ {
		exp.Add(1)
		go func(g int) {
			defer exp.Done()
			xs := []float32{1, 2, 3, 4}
			buf, err := dlpack.NewBuffer[float32]([]int64{4})
			if err != nil {
				t.Error(err)
				return
			}
			copy(buf.Data(), xs)
			defer buf.Close()
			for i := 0; i < perExporter; i++ {
				var m *dlpack.ManagedTensorVersioned
				if i%2 == 0 {
					m, err = dlpack.Export(xs, []int64{4})
				} else {
					m, err = buf.Export(nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 { // Go -> Go instead of Go -> C
					err := dlpack.Borrow(unsafe.Pointer(m), func(f dlpack.Foreign) error {
						ys, err := dlpack.Slice[float32](f)
						if err == nil && ys[2] != 3 {
							t.Errorf("Go -> Go read %v", ys)
						}
						return err
					})
					if err != nil {
						t.Error(err)
					}
					goToGo.Add(1)
					continue
				}
				for !cshim.StressGive(unsafe.Pointer(m)) {
					runtime.Gosched()
				}
				given.Add(1)
			}
		}(g)
	}
	exp.Wait()
	res := cshim.StressFinish() // joins every C thread
	wg.Wait()
	close(handoff)
	closers.Wait()

	require.True(t, waitFor(func() bool {
		return dlpack.ReadStats().LeakedImports-leakedBefore == dropped.Load() && cshim.StressDeleted() == res.Made
	}), "the cleanup releases every dropped owner")
	res.Deleted = cshim.StressDeleted()
	t.Logf("C threads: %d producers x %d tensors, %d consumers; goroutines: %d importers, %d exporters x %d",
		producers, perProducer, consumers, importers, exporters, perExporter)
	t.Logf("imported+closed %d, borrowed %d, dropped %d (cleanup), exported to C %d, Go->Go %d",
		imported.Load(), borrowed.Load(), dropped.Load(), given.Load(), goToGo.Load())
	assert.Equal(t, int64(producers*perProducer), res.Made)
	assert.Equal(t, res.Made, res.Deleted, "every C-made tensor deleted exactly once")
	assert.Equal(t, res.Made, imported.Load()+borrowed.Load()+dropped.Load())
	assert.Equal(t, given.Load(), res.Released, "every export handed to C released")
	assert.Equal(t, int64(0), res.BadSums, "C read the right data")
	assert.Equal(t, int64(exporters*perExporter), given.Load()+goToGo.Load())
	assert.Equal(t, int64(0), dlpack.Outstanding())
}
