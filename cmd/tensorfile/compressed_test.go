//go:build cgo

package main

import (
	"bytes"
	"encoding/binary"
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
	writeCompressedBatches(t, path, noNumbers, 1)
}

// writeCompressedBatches is writeCompressedArrow's file with the batch
// written batches times.
func writeCompressedBatches(t *testing.T, path string, noNumbers bool, batches int) {
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
	for range batches {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
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

// lz4Frames returns the offsets of the LZ4 frames in an Arrow IPC file:
// each compressed buffer is an 8-byte uncompressed length, then a frame.
func lz4Frames(b []byte) []int {
	var at []int
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte{0x04, 0x22, 0x4d, 0x18})
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + 4
	}
}

// A compressed Arrow file with a buffer that does not decompress (a
// lying length prefix, a broken frame) is a broken file, not a file of
// unsupported columns: inspect exits 1 naming the file and the batch,
// --json carries the error with the format, and convert fails whatever
// the flags, --skip-unsupported and --tensor included, writing nothing;
// even when only one batch of several is broken. pyarrow raises on the
// same damage (the conformance corpus, make cli).
func TestBrokenCompressedArrow(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "two.feather")
	writeCompressedBatches(t, good, false, 2)
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	frames := lz4Frames(whole)
	if len(frames) != 6 || binary.LittleEndian.Uint64(whole[frames[3]-8:]) != 800 {
		t.Fatalf("%d LZ4 frames, the fourth of %d bytes: not the layout expected (x, s offsets, s data; twice)", len(frames), binary.LittleEndian.Uint64(whole[frames[3]-8:]))
	}
	r := ok(t, "convert", "--quiet", "--skip-unsupported", good, filepath.Join(dir, "good.safetensors"))
	if !strings.Contains(r.stderr, `skipped "s[0]"`) || !strings.Contains(r.stderr, `skipped "s[1]"`) {
		t.Errorf("the intact file: stderr %q", r.stderr)
	}

	for _, c := range []struct {
		name string
		edit func([]byte)
		want string
	}{
		{"length.feather", func(b []byte) { binary.LittleEndian.PutUint64(b[frames[3]-8:], 792) }, "decompresses to more than the declared 792 bytes"},
		{"frame.feather", func(b []byte) { b[frames[3]+4] ^= 0x80 }, "LZ4 frame descriptor"},
	} {
		b := bytes.Clone(whole)
		c.edit(b)
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want := []string{path + ": ", "dlarrow: malformed Arrow IPC file", "record batch = 1", c.want}
		r := tf(t, "inspect", path)
		if r.code != 1 || r.stdout != "" || !containsAll(r.stderr, want) {
			t.Errorf("inspect %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.name, r.code, r.stdout, r.stderr, want)
		}
		rep, r := inspectJSON(t, path)
		if f := rep.Files[0]; r.code != 1 || f.Format != "arrow" || !containsAll(f.Error, want) || len(f.Tensors) != 0 || len(f.Skipped) != 0 {
			t.Errorf("inspect --json %s: exit %d, %+v", c.name, r.code, f)
		}
		for _, args := range [][]string{{"--skip-unsupported"}, {"--quiet", "--skip-unsupported"}, {"--tensor", "x[0]"}, nil} {
			out := filepath.Join(dir, "out.safetensors")
			r := tf(t, append(append([]string{"convert"}, args...), path, out)...)
			if r.code != 1 || !containsAll(r.stderr, want) || strings.Contains(r.stderr, "skipped") {
				t.Errorf("convert %v %s: exit %d, stderr %q; want exit 1 and %q", args, c.name, r.code, r.stderr, want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("convert %v %s wrote %s", args, c.name, out)
			}
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
