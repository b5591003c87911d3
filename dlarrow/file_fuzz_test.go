//go:build unix

package dlarrow

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// FuzzOpenFile opens any bytes as an Arrow IPC file and asks for every
// column of every batch (up to 8 x 8): nothing may panic or fault, OpenFile
// fails with an error wrapping ErrFormat or ErrBuffer, every tensor
// Column gives lies inside the mapping (or, decompressed from a
// compressed batch, is Copied), and Close with every tensor
// released unmaps. Seeds: the pyarrow-written files of testdata/ipc
// (dictionary, nested, extension, compressed, empty, many batches, nulls).
func FuzzOpenFile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "ipc", "*.arrow"))
	if len(seeds) == 0 {
		f.Fatal("no seed files in testdata/ipc")
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("ARROW1\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x08\x00\x00\x00ARROW1"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.arrow")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := OpenFile(path)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrBuffer) {
				t.Fatalf("OpenFile: %v wraps neither ErrFormat nor ErrBuffer", err)
			}
			return
		}
		m := file.m
		for b := 0; b < min(file.NumRecordBatches(), 8); b++ {
			for c := 0; c < min(file.Schema().NumFields(), 8); c++ {
				tn, err := file.Column(b, c)
				if err != nil {
					continue
				}
				if len(tn.buf) > 0 {
					if m.contains(tn.buf) == tn.Copied() {
						t.Fatalf("batch %d column %d: copied %v, in the mapping %v", b, c, tn.Copied(), !tn.Copied())
					}
					var sum byte
					for _, x := range tn.buf {
						sum += x
					}
					_ = sum
				}
				var d dlpack.Description
				if err := tn.DescribeTensor(&d); err == nil {
					if d.Size > 0 && !tn.Copied() && !m.contains(unsafe.Slice((*byte)(d.Data), d.Size)) {
						t.Fatalf("batch %d column %d: described data outside the mapping", b, c)
					}
					if r, ok := d.Owner.(dlpack.Releaser); ok {
						r.ReleaseTensor()
					}
				}
				tn.Close()
			}
		}
		file.Close()
		if m.data != nil || m.refs.Load() != 0 {
			t.Fatalf("after Close: mapped %v, %d references", m.data != nil, m.refs.Load())
		}
	})
}
