//go:build unix

package dlarrow

import (
	"errors"
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
// mapping and holds 0, 1, 2, ... across the batches, as gen.py wrote it.
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
			if !f.m.contains(unsafe.Slice((*byte)(d.Data), n*8)) {
				t.Errorf("batch %d: column x is not in the mapping", b)
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

// Compressed columns are decompressed by arrow-go into new memory, so
// they are refused rather than silently copied.
func TestOpenFilePyarrowCompressed(t *testing.T) {
	for _, name := range []string{"compressed_zstd.arrow", "compressed_lz4.arrow"} {
		f := pyarrowFile(t, name)
		if _, err := f.Column(0, 0); !errors.Is(err, ErrBuffer) {
			t.Errorf("%s: %v, want ErrBuffer", name, err)
		}
	}
}
