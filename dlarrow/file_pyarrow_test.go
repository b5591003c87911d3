//go:build unix

package dlarrow

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// pyarrowFile opens one of the files testdata/ipc/gen.py wrote with
// pyarrow's file writer (pa.ipc.new_file).
func pyarrowFile(t *testing.T, name string) *File {
	t.Helper()
	f, err := OpenFile(filepath.Join("testdata", "ipc", name))
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// checkX checks that column "x" (column 0) of every batch shares the
// mapping (or, decompressed, lies outside it) and holds 0, 1, 2, ...
// across the batches, as gen.py wrote it.
func checkX(t *testing.T, f *File, rows int) {
	t.Helper()
	next := 0.0
	for b := 0; b < f.NumRecordBatches(); b++ {
		tn, err := f.Column(b, 0)
		if err != nil {
			t.Fatalf("batch %d column x: %v", b, err)
		}
		var d dlpack.Description
		if err := tn.DescribeTensor(&d); err != nil {
			t.Fatal(err)
		}
		n := int(d.Shape[0])
		if n > 0 {
			if f.m.contains(unsafe.Slice((*byte)(d.Data), n*8)) == tn.Copied() {
				t.Errorf("batch %d: column x copied %v, in the mapping %v", b, tn.Copied(), !tn.Copied())
			}
			for i, v := range unsafe.Slice((*float64)(unsafe.Add(d.Data, d.ByteOffset)), n) {
				if v != next {
					t.Fatalf("batch %d x[%d] = %v, want %v", b, i, v, next)
				}
				next++
			}
		}
		d.Owner.(dlpack.Releaser).ReleaseTensor()
		tn.Close()
	}
	if int(next) != rows {
		t.Errorf("%d rows of x, want %d", int(next), rows)
	}
}

// columnErr returns the error of Column(batch, named column).
func columnErr(t *testing.T, f *File, batch int, name string) error {
	t.Helper()
	idx := f.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %v", name, f.Schema())
	}
	tn, err := f.Column(batch, idx[0])
	if err == nil {
		tn.Close()
	}
	return err
}

// Files written by pyarrow open; the columns a tensor can share are
// shared; the others are refused with the sentinel their type calls for.
// In particular a dictionary-encoded column, on which arrow-go's
// ipc.NewMappedFileReader panics, is refused by Column alone.
func TestOpenFilePyarrowFiles(t *testing.T) {
	type refusal struct {
		col string
		err error
		msg string
	}
	cases := []struct {
		name    string
		batches int
		rows    int
		ok      []string
		refused []refusal
	}{
		{"dictionary.arrow", 1, 5, []string{"y"}, []refusal{{"d", ErrType, "dictionary"}}},
		{"dictionary_batches.arrow", 2, 6, nil, []refusal{{"d", ErrType, "dictionary"}}},
		{"nested.arrow", 1, 3, []string{"f"}, []refusal{{"l", ErrType, "list"}, {"s", ErrType, "struct"}}},
		{"extension.arrow", 1, 3, []string{"t"}, nil},
		{"empty.arrow", 0, 0, nil, nil},
		{"empty_batch.arrow", 1, 0, nil, nil},
		{"many_batches.arrow", 20, 40, []string{"y"}, nil},
		{"nulls.arrow", 1, 3, nil, []refusal{{"z", ErrNulls, "null"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := pyarrowFile(t, c.name)
			if f.NumRecordBatches() != c.batches {
				t.Fatalf("%d record batches, want %d", f.NumRecordBatches(), c.batches)
			}
			checkX(t, f, c.rows)
			for b := 0; b < c.batches; b++ {
				for _, col := range c.ok {
					if err := columnErr(t, f, b, col); err != nil {
						t.Errorf("batch %d column %q: %v", b, col, err)
					}
				}
				for _, r := range c.refused {
					err := columnErr(t, f, b, r.col)
					if !errors.Is(err, r.err) || !strings.Contains(err.Error(), r.msg) || !strings.Contains(err.Error(), `"`+r.col+`"`) {
						t.Errorf("batch %d column %q: %v, want %v naming the column and %q", b, r.col, err, r.err, r.msg)
					}
				}
			}
			if _, err := f.Column(c.batches, 0); !errors.Is(err, dlpack.ErrShape) {
				t.Errorf("batch %d of %d: %v", c.batches, c.batches, err)
			}
			if f.m.refs.Load() != 1 {
				t.Errorf("%d references left besides the File's", f.m.refs.Load()-1)
			}
		})
	}
}

// Compressed files, as pyarrow writes them (pa.ipc.new_file with
// IpcWriteOptions(compression=...), and feather.write_feather, lz4 by
// default or zstd), read bit for bit as the same table written
// uncompressed (plain.feather), every column of every batch: the same
// tensors, or the same refusals; decompressed columns are copies
// (Copied), outside the mapping, and hold no reference to it.
func TestOpenFilePyarrowCompressed(t *testing.T) {
	for _, name := range []string{"compressed_zstd.arrow", "compressed_lz4.arrow"} {
		checkX(t, pyarrowFile(t, name), 64)
	}
	plain := pyarrowFile(t, "plain.feather")
	for _, name := range []string{"feather_lz4.feather", "feather_zstd.feather"} {
		f := pyarrowFile(t, name)
		if !f.batches[0].msg.compressed {
			t.Fatalf("%s is not compressed", name)
		}
		if !f.Schema().Equal(plain.Schema()) || f.NumRecordBatches() != plain.NumRecordBatches() {
			t.Fatalf("%s: %v in %d batches, want %v in %d", name, f.Schema(), f.NumRecordBatches(), plain.Schema(), plain.NumRecordBatches())
		}
		shared := 0
		for b := 0; b < f.NumRecordBatches(); b++ {
			for c, field := range f.Schema().Fields() {
				want, werr := plain.Column(b, c)
				got, gerr := f.Column(b, c)
				switch {
				case werr != nil && gerr != nil && werr.Error() == gerr.Error():
				case werr != nil || gerr != nil:
					t.Errorf("%s batch %d column %q: %v, uncompressed %v", name, b, field.Name, gerr, werr)
				default:
					if !got.Copied() || want.Copied() || f.m.contains(got.buf) {
						t.Errorf("%s batch %d column %q: copied %v (uncompressed %v)", name, b, field.Name, got.Copied(), want.Copied())
					}
					if g, w := elementBytes(t, got), elementBytes(t, want); got.DataType() != want.DataType() ||
						fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) || !bytes.Equal(g, w) || len(w) == 0 {
						t.Errorf("%s batch %d column %q: %v%v, %d bytes; uncompressed %v%v, %d bytes, equal %v", name, b, field.Name,
							got.DataType(), got.Shape(), len(g), want.DataType(), want.Shape(), len(w), bytes.Equal(g, w))
					}
					shared++
				}
				for _, tn := range []*Tensor{got, want} {
					if tn != nil {
						tn.Close()
					}
				}
			}
		}
		if shared != 12 { // x, i, u, h, z and f, in two batches
			t.Errorf("%s: %d columns read, want 12", name, shared)
		}
		if f.m.refs.Load() != 1 {
			t.Errorf("%s: %d references left besides the File's", name, f.m.refs.Load()-1)
		}
	}
	// a string_view column's data buffers are not bounded by the schema:
	// the compressed batch is refused, naming the type
	f := pyarrowFile(t, "feather_view.feather")
	if _, err := f.Column(0, 0); !errors.Is(err, ErrBuffer) || !strings.Contains(err.Error(), "string_view") {
		t.Errorf("feather_view.feather: %v, want ErrBuffer naming string_view", err)
	}
}

// elementBytes returns the bytes of a compact tensor's elements.
func elementBytes(t *testing.T, tn *Tensor) []byte {
	t.Helper()
	if tn.strides != nil {
		t.Fatalf("strided tensor %v", tn.strides)
	}
	n := int64(tn.st.dt.ItemSize())
	for _, d := range tn.shape {
		n *= d
	}
	return tn.buf[tn.offset : int64(tn.offset)+n]
}
