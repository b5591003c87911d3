//go:build cgo && !race && !asan

package dlpack_test

import (
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHotPathAllocations pins the allocation counts the performance
// targets promise: export + release, the scoped import and the owned
// import of a C tensor allocate nothing (the owned import's safety net
// allocates once every 64 imports, less than once per import).
// A change that makes a stack array escape shows up here, not only in a
// benchmark nobody reruns.
func TestHotPathAllocations(t *testing.T) {
	xs := make([]float32, 1024)
	shape := []int64{32, 32}
	export := testing.AllocsPerRun(1000, func() {
		m, err := dlpack.Export(xs, shape)
		if err != nil {
			t.Fatal(err)
		}
		cshim.BenchConsume(unsafe.Pointer(m))
	})
	assert.Zero(t, export, "export + C release")

	fn := func(f dlpack.Foreign) error { _, err := dlpack.Slice[float32](f); return err }
	borrow := testing.AllocsPerRun(1000, func() {
		if err := dlpack.Borrow(cshim.BenchMake(), fn); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, borrow, "Borrow + Slice + release")

	owned := testing.AllocsPerRun(1000, func() {
		f, err := dlpack.Import(cshim.BenchMake())
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	})
	// A slab, its ledger and its cleanup once every 64 imports: less than
	// one allocation per import.
	assert.Zero(t, owned, "Import + Close")

	// 1024 outstanding at once, released on a C-created thread: the
	// records must all come back to the exporter for reuse.
	cptrs, ptrs := cshim.CPointers(1024)
	defer cshim.FreeCPointers(cptrs)
	warm := testing.AllocsPerRun(20, func() {
		for i := range ptrs {
			m, err := dlpack.Export(xs, shape)
			if err != nil {
				t.Fatal(err)
			}
			ptrs[i] = unsafe.Pointer(m)
		}
		cshim.ReleaseOnWarmThread(cptrs, len(ptrs))
	})
	assert.Zero(t, warm, "export + release on a C thread")

	goToGo := testing.AllocsPerRun(1000, func() {
		m, _ := dlpack.Export(xs, shape)
		if err := dlpack.Borrow(unsafe.Pointer(m), fn); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, goToGo, "Go -> Go")

	// 64 tensors per batch, made by C in one call: no allocation per batch.
	bptrs, bps := cshim.CPointers(64)
	defer cshim.FreeCPointers(bptrs)
	fs := make([]dlpack.Foreign, len(bps))
	each := func(fs []dlpack.Foreign) error {
		for _, f := range fs {
			if _, err := dlpack.Slice[float32](f); err != nil {
				return err
			}
		}
		return nil
	}
	batch := testing.AllocsPerRun(200, func() {
		cshim.BenchMakeBatch(bptrs, len(bps))
		if err := dlpack.BorrowBatch(bps, fs, each); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, batch, "BorrowBatch of 64")

	// A Buffer taken Go to Go: only its safety net's allocations (the
	// owner and the cleanup that release a Foreign nobody closed).
	b, err := dlpack.NewBuffer[float32]([]int64{4})
	require.NoError(t, err)
	defer b.Close()
	fromBuffer := testing.AllocsPerRun(100, func() {
		f, err := dlpack.From(b)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	})
	assert.LessOrEqual(t, fromBuffer, 3.0, "From(Buffer) + Close")
}
