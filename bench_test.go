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

// BenchmarkBorrowBatch: scoped imports of tensors that C makes 64 per
// call, each viewed as []float32; one op is one tensor. The deleters run
// in one crossing per batch.
func BenchmarkBorrowBatch(b *testing.B) {
	const batch = 64
	cptrs, ptrs := cshim.CPointers(batch)
	defer cshim.FreeCPointers(cptrs)
	fs := make([]dlpack.Foreign, batch)
	var sum float32
	fn := func(fs []dlpack.Foreign) error {
		for _, f := range fs {
			xs, err := dlpack.Slice[float32](f)
			if err != nil {
				return err
			}
			sum += xs[0]
		}
		return nil
	}
	b.ReportAllocs()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		cshim.BenchMakeBatch(cptrs, n)
		if err := dlpack.BorrowBatch(ptrs[:n], fs, fn); err != nil {
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

// BenchmarkImportCloseLegacy: as BenchmarkImportClose for a legacy tensor
// with NULL strides.
func BenchmarkImportCloseLegacy(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		f, err := dlpack.ImportLegacy(cshim.BenchMakeLegacy())
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// benchWarmCThread times export + release where every release runs on
// one persistent thread created in C (batches of 1024; the first callback
// from that thread, ~10 µs, happens before the timer starts).
func benchWarmCThread(b *testing.B, export func() (*dlpack.ManagedTensorVersioned, error)) {
	const batch = 1024
	cptrs, ptrs := cshim.CPointers(batch)
	defer cshim.FreeCPointers(cptrs)
	run := func(n int) {
		for i := 0; i < n; i++ {
			m, err := export()
			if err != nil {
				b.Fatal(err)
			}
			ptrs[i] = unsafe.Pointer(m)
		}
		cshim.ReleaseOnWarmThread(cptrs, n)
	}
	run(1)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		run(min(batch, b.N-done))
	}
}

// BenchmarkExportReleaseWarmCThread: Go-memory exports released on a warm
// C-created thread.
func BenchmarkExportReleaseWarmCThread(b *testing.B) {
	xs := make([]float32, 1024)
	shape := []int64{32, 32}
	benchWarmCThread(b, func() (*dlpack.ManagedTensorVersioned, error) { return dlpack.Export(xs, shape) })
}

// BenchmarkSlice: building the typed []T view of an open tensor.
func BenchmarkSlice(b *testing.B) {
	f, err := dlpack.Import(cshim.BenchMake())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dlpack.Slice[float32](f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkViewOf: building a strided View of an open tensor.
func BenchmarkViewOf(b *testing.B) {
	f, err := dlpack.Import(cshim.BenchMake())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dlpack.ViewOf[float32](f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIterate: summing 1M compact float32 (4 MiB) through a plain
// slice loop, View.All and View.At, reported in bytes/s.
func BenchmarkIterate(b *testing.B) {
	const n = 1 << 20
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = 1
	}
	m, err := dlpack.Export(xs, []int64{1024, 1024})
	if err != nil {
		b.Fatal(err)
	}
	f, err := dlpack.Import(unsafe.Pointer(m))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v, err := dlpack.ViewOf[float32](f)
	if err != nil {
		b.Fatal(err)
	}
	check := func(s float32) {
		if s != n {
			b.Fatal(s)
		}
	}
	b.Run("slice", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			var s float32
			for _, x := range xs {
				s += x
			}
			check(s)
		}
	})
	b.Run("view-all", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			var s float32
			for _, x := range v.All() {
				s += x
			}
			check(s)
		}
	})
	b.Run("view-at", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			var s float32
			for i := 0; i < 1024; i++ {
				for j := 0; j < 1024; j++ {
					x, _ := v.At(i, j)
					s += x
				}
			}
			check(s)
		}
	})
}

// BenchmarkSizes: export and import cost must not grow with the data
// (1 KiB against 1 GiB): nothing is copied or touched.
func BenchmarkSizes(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int64
	}{{"1KiB", 1 << 10}, {"1GiB", 1 << 30}} {
		goData := make([]byte, size.n)
		buf, err := dlpack.NewBuffer[byte]([]int64{size.n})
		if err != nil {
			b.Fatal(err)
		}
		cData := unsafe.Pointer(&buf.Data()[0])
		shape := []int64{size.n}
		b.Run("export-"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := dlpack.Export(goData, shape)
				if err != nil {
					b.Fatal(err)
				}
				cshim.BenchConsume(unsafe.Pointer(m))
			}
		})
		b.Run("import-"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := dlpack.Import(cshim.BenchMakeOver(cData, size.n))
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		buf.Close()
	}
}

// Parallel variants: two goroutines on the two cores.
func BenchmarkParallel(b *testing.B) {
	b.Run("ExportRelease", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			xs := make([]float32, 1024)
			shape := []int64{32, 32}
			for pb.Next() {
				m, err := dlpack.Export(xs, shape)
				if err != nil {
					b.Error(err)
					return
				}
				cshim.BenchConsume(unsafe.Pointer(m))
			}
		})
	})
	b.Run("ImportClose", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f, err := dlpack.Import(cshim.BenchMake())
				if err != nil {
					b.Error(err)
					return
				}
				f.Close()
			}
		})
	})
	b.Run("BorrowSlice", func(b *testing.B) {
		b.ReportAllocs()
		fn := func(f dlpack.Foreign) error { _, err := dlpack.Slice[float32](f); return err }
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := dlpack.Borrow(cshim.BenchMake(), fn); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkBufferExportReleaseWarmCThread: the same for a Buffer, whose
// deleter is pure C (no callback into Go from the C thread).
func BenchmarkBufferExportReleaseWarmCThread(b *testing.B) {
	buf, err := dlpack.NewBuffer[float32]([]int64{32, 32})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	benchWarmCThread(b, func() (*dlpack.ManagedTensorVersioned, error) { return buf.Export(nil) })
}

// BenchmarkProtocolGoToGo: a Go-to-Go round trip through the protocol: a
// Go consumer takes a Go producer's Array with From, views it as
// []float32 and closes it. No C, no pinning, no handle.
func BenchmarkProtocolGoToGo(b *testing.B) {
	b.ReportAllocs()
	a := dlpack.NewArray(make([]float32, 1024), []int64{32, 32})
	for b.Loop() {
		f, err := dlpack.From(a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dlpack.Slice[float32](f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkProtocolProduce: a Go Array handed to a C consumer through the
// protocol (Produce), which reads it and calls the deleter.
func BenchmarkProtocolProduce(b *testing.B) {
	b.ReportAllocs()
	a := dlpack.NewArray(make([]float32, 1024), []int64{32, 32})
	req := dlpack.Request{}
	for b.Loop() {
		m, err := a.DLPack(req)
		if err != nil {
			b.Fatal(err)
		}
		cshim.BenchConsume(m.Pointer())
	}
}
