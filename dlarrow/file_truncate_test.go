//go:build unix

package dlarrow

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
)

// A file cut short by another process while mapped: Column reads the
// metadata of a batch that lay past the new end, and gets ErrTruncated
// where a plain read would kill the process.
func TestFileTruncatedUnderTheMapping(t *testing.T) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	path := filepath.Join(t.TempDir(), "big.arrow")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b := array.NewFloat64Builder(mem)
		b.AppendValues(make([]float64, 1<<18), nil) // 2 MiB a batch
		arr := b.NewArray()
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len()))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		arr.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.Close()

	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.NumRecordBatches() != 2 {
		t.Fatalf("%d batches", f.NumRecordBatches())
	}
	if out, err := exec.Command("truncate", "-s", "4096", path).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
	tn, err := f.Column(1, 0)
	var fe *dlpack.FieldError
	if !errors.Is(err, ErrTruncated) || !errors.As(err, &fe) {
		if tn != nil {
			tn.Close()
		}
		t.Fatalf("Column of a batch past the truncation: %v, want ErrTruncated", err)
	}
	t.Log(err)
	if f.m.refs.Load() != 1 {
		t.Errorf("%d references left besides the File's", f.m.refs.Load()-1)
	}
}
