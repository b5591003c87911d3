//go:build cgo

package dlarrow_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/internal/cshim"
)

func float32Column(n int) *array.Float32 {
	b := array.NewFloat32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(make([]float32, n), nil)
	return b.NewFloat32Array()
}

// BenchmarkArrowProduce: an Arrow float32 column of 1024 values (described
// once) handed to a C consumer, which reads the header and calls the
// deleter: a Retain, an export, a Release.
func BenchmarkArrowProduce(b *testing.B) {
	b.ReportAllocs()
	col := float32Column(1024)
	defer col.Release()
	t, err := dlarrow.FromArray(col)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	req := dlpack.Request{}
	for b.Loop() {
		m, err := t.DLPack(req)
		if err != nil {
			b.Fatal(err)
		}
		cshim.BenchConsume(m.Pointer())
	}
}

// BenchmarkArrowExport: as BenchmarkArrowProduce, with the column checked
// afresh each time (FromArray, DLPack, Release).
func BenchmarkArrowExport(b *testing.B) {
	b.ReportAllocs()
	col := float32Column(1024)
	defer col.Release()
	req := dlpack.Request{}
	for b.Loop() {
		t, err := dlarrow.FromArray(col)
		if err != nil {
			b.Fatal(err)
		}
		m, err := t.DLPack(req)
		t.Close()
		if err != nil {
			b.Fatal(err)
		}
		cshim.BenchConsume(m.Pointer())
	}
}

// BenchmarkArrowGoToGo: a column taken by a Go consumer (dlpack.From),
// viewed as []float32 and closed.
func BenchmarkArrowGoToGo(b *testing.B) {
	b.ReportAllocs()
	col := float32Column(1024)
	defer col.Release()
	t, err := dlarrow.FromArray(col)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	for b.Loop() {
		f, err := dlpack.From(t)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dlpack.ReadOnlySlice[float32](f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkArrowToArray: a C tensor of 1024 float32 imported and wrapped
// as an Arrow array, then released (the producer's deleter runs).
func BenchmarkArrowToArray(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		f, err := dlpack.Import(cshim.BenchMake())
		if err != nil {
			b.Fatal(err)
		}
		arr, err := dlarrow.ToArray(f)
		if err != nil {
			b.Fatal(err)
		}
		arr.Release()
	}
}
