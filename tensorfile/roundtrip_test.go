package tensorfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

func rowMajorOf(t *testing.T, tn *tensorfile.Tensor) []byte {
	t.Helper()
	f, err := dlpack.From(tn)
	if err != nil {
		t.Fatalf("%v: %v", tn, err)
	}
	defer f.Close()
	b, err := tensorfile.RowMajor(f)
	if err != nil {
		t.Fatalf("%v: %v", tn, err)
	}
	return b
}

// Go writes every format from C-order and strided (Fortran-order) sources
// and reads the files back: same shapes, types and bytes.
func TestWriteReadRoundTrip(t *testing.T) {
	noLiveMappings(t)
	named, want, types := sources(t)
	dir := t.TempDir()
	var npy, st []tensorfile.Named
	for _, n := range named {
		if types[n.Name].descr != "" {
			npy = append(npy, n)
		}
		if types[n.Name].st != "" {
			st = append(st, n)
		}
	}
	check := func(what string, f *tensorfile.File, list []tensorfile.Named, mapped bool) {
		t.Helper()
		if len(f.Tensors()) != len(list) {
			t.Errorf("%s: %d tensors, want %d", what, len(f.Tensors()), len(list))
		}
		for _, n := range list {
			name := n.Name
			if what == "npy" {
				name = ""
			}
			tn, err := f.Tensor(name)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			if tn.DataType() != types[n.Name].dt || tn.Mapped() != mapped {
				t.Errorf("%s %s: %v", what, n.Name, tn)
			}
			if !bytes.Equal(rowMajorOf(t, tn), want[n.Name]) {
				t.Errorf("%s %s: bytes differ", what, n.Name)
			}
		}
	}
	write := func(name string, fn func(*os.File) error) string {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(fh); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fh.Close()
		return p
	}
	for _, n := range npy {
		p := write(n.Name+".npy", func(fh *os.File) error { return tensorfile.WriteNPY(fh, n.Tensor) })
		f, err := tensorfile.OpenNPY(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		check("npy", f, []tensorfile.Named{n}, true)
		f.Close()
	}
	for _, compress := range []bool{false, true} {
		p := write("a.npz", func(fh *os.File) error { return tensorfile.WriteNPZ(fh, npy, compress) })
		f, err := tensorfile.OpenNPZ(p)
		if compress && errors.Is(err, dlpack.ErrCgoRequired) {
			continue // deflated members are copied into C memory
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		check("npz", f, npy, !compress)
		f.Close()
	}
	meta := map[string]string{"a": "b"}
	p := write("a.safetensors", func(fh *os.File) error { return tensorfile.WriteSafetensors(fh, st, meta) })
	f, err := tensorfile.OpenSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check("safetensors", f, st, true)
	if !mapsEqual(f.Metadata(), meta) {
		t.Errorf("metadata %v", f.Metadata())
	}
	f.Close()
}

// A read-write mapping gives writable tensors whose writes reach the file;
// a read-only one never gives a writable tensor.
func TestReadWriteMapping(t *testing.T) {
	noLiveMappings(t)
	p := writeTemp(t, "a.npy", f64npy(4))
	f, err := tensorfile.OpenNPY(p, tensorfile.ReadWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := dlpack.From(f.Tensors()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	xs, err := dlpack.Slice[float64](x)
	if err != nil {
		t.Fatal(err)
	}
	xs[2] = 42
	x.Close()
	f.Close()
	g, err := tensorfile.OpenNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	y, err := dlpack.From(g.Tensors()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if _, err := dlpack.Slice[float64](y); err == nil {
		t.Fatal("a read-only mapping gave a writable slice")
	}
	ys, err := dlpack.ReadOnlySlice[float64](y)
	if err != nil || ys[2] != 42 || ys[3] != 3 {
		t.Fatalf("%v %v: the write did not reach the file", ys, err)
	}
}
