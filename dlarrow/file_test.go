//go:build unix

package dlarrow

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
)

// writeIPC writes a one-batch Arrow IPC file with a float64 column "x"
// (0, 1, ..., n-1), an int32 column "y" and a string column "s".
func writeIPC(t *testing.T, n int, opts ...ipc.Option) string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "y", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Float64Builder).Append(float64(i))
		b.Field(1).(*array.Int32Builder).Append(int32(-i))
		b.Field(2).(*array.StringBuilder).Append("v")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "data.arrow")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(out, append([]ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func inside(data []byte, p unsafe.Pointer) bool {
	lo := uintptr(unsafe.Pointer(&data[0]))
	return uintptr(p) >= lo && uintptr(p) < lo+uintptr(len(data))
}

// The evidence behind File: over the same mapped bytes, ipc.NewFileReader
// (an io.ReaderAt) copies the column out of the mapping, and
// ipc.NewMappedFileReader slices it.
func TestIPCReadersCopyOrShare(t *testing.T) {
	path := writeIPC(t, 100)
	osf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	st, _ := osf.Stat()
	data, err := syscall.Mmap(int(osf.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(data)
	first := func(r *ipc.FileReader) unsafe.Pointer {
		rec, err := r.RecordBatchAt(0)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		return unsafe.Pointer(&rec.Column(0).(*array.Float64).Float64Values()[0])
	}
	copying, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer copying.Close()
	if p := first(copying); inside(data, p) {
		t.Errorf("ipc.NewFileReader: column at %p inside the mapping: it no longer copies", p)
	}
	mapped, err := ipc.NewMappedFileReader(data)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if p := first(mapped); !inside(data, p) {
		t.Errorf("ipc.NewMappedFileReader: column at %p outside the mapping: it copies", p)
	}
}

// A column of a mapped file points into the mapping, which outlives the
// File and the Tensor until the export's release.
func TestFileColumnKeepsMapping(t *testing.T) {
	f, err := OpenFile(writeIPC(t, 1000))
	if err != nil {
		t.Fatal(err)
	}
	m := f.m
	tn, err := f.Column(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var d dlpack.Description
	if err := tn.DescribeTensor(&d); err != nil {
		t.Fatal(err)
	}
	if !inside(m.data, d.Data) || !d.ReadOnly || d.Shape[0] != 1000 || d.DType != dlpack.Float64 {
		t.Fatalf("column: data %p inside %v, read-only %v, shape %v, %v", d.Data, inside(m.data, d.Data), d.ReadOnly, d.Shape, d.DType)
	}
	tn.Close()
	f.Close()
	if m.data == nil {
		t.Fatal("unmapped while an export holds the column")
	}
	xs := unsafe.Slice((*float64)(unsafe.Add(d.Data, d.ByteOffset)), 1000)
	if xs[999] != 999 {
		t.Errorf("last value %v, want 999", xs[999])
	}
	d.Owner.(dlpack.Releaser).ReleaseTensor()
	if m.data != nil || m.refs.Load() != 0 {
		t.Errorf("after the last release: mapped %v, refs %d", m.data != nil, m.refs.Load())
	}
	if _, err := f.Column(0, 0); !errors.Is(err, dlpack.ErrClosed) {
		t.Errorf("Column after Close: %v", err)
	}
}

func TestFileRefusals(t *testing.T) {
	f, err := OpenFile(writeIPC(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Column(0, 2); !errors.Is(err, ErrType) || !strings.Contains(err.Error(), `"s"`) {
		t.Errorf("string column: %v", err)
	}
	if _, err := f.Column(0, 3); !errors.Is(err, dlpack.ErrShape) {
		t.Errorf("column 3 of 3: %v", err)
	}
	if _, err := f.Column(1, 0); err == nil {
		t.Error("record batch 1 of 1: no error")
	}
	if f.m.refs.Load() != 1 {
		t.Errorf("refused columns left %d references", f.m.refs.Load()-1)
	}

	z, err := OpenFile(writeIPC(t, 1000, ipc.WithZstd(), ipc.WithMinSpaceSavings(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if zt, err := z.Column(0, 0); err != nil || !zt.Copied() || zt.shape[0] != 1000 {
		t.Errorf("compressed column: %v", err)
	} else {
		zt.Close()
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing.arrow")); err == nil {
		t.Error("OpenFile of a missing file: no error")
	}
	empty := filepath.Join(t.TempDir(), "empty.arrow")
	os.WriteFile(empty, nil, 0o644)
	if _, err := OpenFile(empty); !errors.Is(err, ErrBuffer) {
		t.Errorf("OpenFile of an empty file: %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.arrow")
	os.WriteFile(junk, []byte("not an arrow file at all"), 0o644)
	if _, err := OpenFile(junk); err == nil {
		t.Error("OpenFile of junk: no error")
	}
}
