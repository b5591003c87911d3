//go:build cgo

package dlpack_test

import (
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// BenchmarkCFloor: produce, consume and release a 32x32 tensor in C alone,
// the floor every other figure is compared with.
func BenchmarkCFloor(b *testing.B) {
	b.ReportAllocs()
	if got := cshim.BenchCFloor(b.N); got != int64(32*b.N) {
		b.Fatal(got)
	}
}

// BenchmarkImportClose: a C-made tensor imported (owned, with the cleanup
// safety net) and closed. Includes the C producer call.
func BenchmarkImportClose(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		f, err := dlpack.Import(cshim.BenchMake())
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkBorrowSlice: scoped import, a typed []float32 view, release on
// return. Includes the C producer call.
func BenchmarkBorrowSlice(b *testing.B) {
	b.ReportAllocs()
	var sum float32
	fn := func(f dlpack.Foreign) error {
		xs, err := dlpack.Slice[float32](f)
		if err == nil {
			sum += xs[0]
		}
		return err
	}
	for b.Loop() {
		if err := dlpack.Borrow(cshim.BenchMake(), fn); err != nil {
			b.Fatal(err)
		}
	}
	_ = sum
}

// BenchmarkExportRelease: a 32x32 view of a Go slice exported and released
// by a C consumer that reads its header (same thread).
func BenchmarkExportRelease(b *testing.B) {
	b.ReportAllocs()
	xs := make([]float32, 1024)
	shape := []int64{32, 32}
	for b.Loop() {
		m, err := dlpack.Export(xs, shape)
		if err != nil {
			b.Fatal(err)
		}
		cshim.BenchConsume(unsafe.Pointer(m))
	}
	if dlpack.Outstanding() != 0 {
		b.Fatal("leak")
	}
}

// BenchmarkGoToGo: export a Go slice and import it back (scoped).
func BenchmarkGoToGo(b *testing.B) {
	b.ReportAllocs()
	xs := make([]float32, 1024)
	shape := []int64{32, 32}
	fn := func(f dlpack.Foreign) error { _, err := dlpack.Slice[float32](f); return err }
	for b.Loop() {
		m, err := dlpack.Export(xs, shape)
		if err != nil {
			b.Fatal(err)
		}
		if err := dlpack.Borrow(unsafe.Pointer(m), fn); err != nil {
			b.Fatal(err)
		}
	}
}
