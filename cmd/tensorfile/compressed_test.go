//go:build cgo

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// writeCompressedArrow writes an lz4-compressed Arrow IPC file of one
// batch of 100 rows: a float64 column "x" (0..99) unless noNumbers, and a
// string column "s".
func writeCompressedArrow(t *testing.T, path string, noNumbers bool) {
	t.Helper()
	mem := memory.NewGoAllocator()
	var fields []arrow.Field
	if !noNumbers {
		fields = append(fields, arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64})
	}
	fields = append(fields, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := 0; i < 100; i++ {
		if !noNumbers {
			b.Field(0).(*array.Float64Builder).Append(float64(i))
		}
		b.Field(len(fields) - 1).(*array.StringBuilder).Append("v")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithLZ4(), ipc.WithMinSpaceSavings(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A compressed Arrow file converts: its columns are decompressed (inspect
// says copied); a column with no tensor form fails the conversion unless
// --skip-unsupported, which names it even with --quiet; a file of which
// nothing converts exits 1 and writes nothing, whatever the flags.
func TestConvertCompressedArrow(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.feather")
	writeCompressedArrow(t, in, false)
	strs := filepath.Join(dir, "strings.feather")
	writeCompressedArrow(t, strs, true)

	r := ok(t, "inspect", in)
	if !strings.Contains(r.stdout, "copied") || strings.Contains(r.stdout, "mapped") || !strings.Contains(r.stdout, "skipped s:") {
		t.Errorf("inspect:\n%s", r.stdout)
	}
	rep, _ := inspectJSON(t, in)
	if f := rep.Files[0]; len(f.Tensors) != 1 || f.Tensors[0].Mapped || len(f.Skipped) != 1 {
		t.Errorf("inspect --json: %+v", f)
	}

	out := filepath.Join(dir, "out.safetensors")
	r = tf(t, "convert", "--quiet", in, out)
	if r.code != 1 || !strings.Contains(r.stderr, `1 of its 2 tensors cannot be converted (--skip-unsupported writes the others)`) ||
		!strings.Contains(r.stderr, `"s": dlarrow: column "s": dlarrow: type has no tensor form`) {
		t.Errorf("convert without --skip-unsupported: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed convert wrote %s", out)
	}

	r = ok(t, "convert", "--quiet", "--skip-unsupported", in, out)
	if !strings.Contains(r.stderr, `tensorfile: note: skipped "s": dlarrow: column "s": dlarrow: type has no tensor form`) {
		t.Errorf("--quiet --skip-unsupported: stderr %q", r.stderr)
	}
	f, err := tensorfile.OpenSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := f.Tensor("x")
	if err != nil {
		t.Fatal(err)
	}
	fx, err := dlpack.From(x)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	xs, err := dlpack.ReadOnlySlice[float64](fx)
	if err != nil || len(xs) != 100 {
		t.Fatalf("x: %v, %v", xs, err)
	}
	for i, v := range xs {
		if v != float64(i) {
			t.Fatalf("x[%d] = %v", i, v)
		}
	}

	for _, flags := range [][]string{nil, {"--skip-unsupported"}, {"--quiet", "--skip-unsupported"}} {
		out := filepath.Join(dir, "none.safetensors")
		r := tf(t, append(append([]string{"convert"}, flags...), strs, out)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no tensor to write: none of its 1 tensor can be converted") ||
			!strings.Contains(r.stderr, `"s": dlarrow: column "s": dlarrow: type has no tensor form`) {
			t.Errorf("convert %v of strings: exit %d, stderr %q", flags, r.code, r.stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("convert %v of strings wrote %s", flags, out)
		}
	}
}
