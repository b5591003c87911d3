package tensorfile_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// fillInPlace fills tensor t of a created file with random bytes through
// a writable Foreign, checks that the Foreign's data lies inside the
// file's mapping (no copy), and returns the bytes written.
func fillInPlace(t *testing.T, f *tensorfile.File, tt *tensorfile.Tensor, rng *rand.Rand) []byte {
	t.Helper()
	fr, err := dlpack.From(tt, dlpack.RequireWritable())
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if fr.IsCopied() || !fr.Writable() {
		t.Fatalf("%s: not a writable view (flags %v)", tt.Name(), fr.Flags())
	}
	lo, n := f.MappedRange()
	if fr.NBytes() > 0 && (fr.DataAddr() < lo || fr.DataAddr()+uintptr(fr.NBytes()) > lo+uintptr(n)) {
		t.Fatalf("%s: data at %#x is not inside the mapping [%#x, +%d)", tt.Name(), fr.DataAddr(), lo, n)
	}
	b, err := dlpack.Slice[uint8](asBytes(t, fr))
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return append([]byte(nil), b...)
}

// asBytes views a compact tensor's memory as uint8 through the protocol.
func asBytes(t *testing.T, f dlpack.Foreign) dlpack.Foreign {
	t.Helper()
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dlpack.From(dlpack.NewArray(b[first:first+int(f.NBytes())], nil), dlpack.RequireWritable(), dlpack.AssumeWritable())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestPeersCreate: files created and filled in place by Go are read by
// safetensors.safe_open, np.load(mmap_mode="r") and Go's Open functions
// bit for bit, without a copy on the Go side.
func TestPeersCreate(t *testing.T) {
	noLiveMappings(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	specs := []tensorfile.Spec{
		{Name: "w", DType: dlpack.Float32, Shape: []int64{3, 5}},
		{Name: "step", DType: dlpack.Int64, Shape: []int64{}},
		{Name: "mask", DType: dlpack.Uint8, Shape: []int64{7}},
		{Name: "half", DType: dlpack.Float16, Shape: []int64{2, 2}},
		{Name: "bf", DType: dlpack.BFloat16, Shape: []int64{3}},
		{Name: "empty", DType: dlpack.Float64, Shape: []int64{0, 4}},
		{Name: "d", DType: dlpack.Float64, Shape: []int64{4, 1}},
	}
	st := filepath.Join(dir, "created.safetensors")
	f, err := tensorfile.CreateSafetensors(st, specs, map[string]string{"format": "np"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, tt := range f.Tensors() {
		if tt.ReadOnly() {
			t.Fatalf("%s is read-only", tt.Name())
		}
		want[tt.Name()] = fillInPlace(t, f, tt, rng)
	}
	f.Close()
	npyPath := filepath.Join(dir, "created.npy")
	g, err := tensorfile.CreateNPY(npyPath, dlpack.Float64, []int64{100, 3})
	if err != nil {
		t.Fatal(err)
	}
	want["npy"] = fillInPlace(t, g, g.Tensors()[0], rng)
	g.Close()

	// Go reads them back, mapped
	check := func(f *tensorfile.File, name, key string) {
		tt, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := dlpack.From(tt)
		if err != nil {
			t.Fatal(err)
		}
		defer fr.Close()
		b, first, err := dlpack.ReadOnlyBytes(fr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b[first:first+int(fr.NBytes())], want[key]) && len(want[key]) > 0 {
			t.Fatalf("%s: Go reads other bytes", key)
		}
	}
	if f, err = tensorfile.OpenSafetensors(st); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		check(f, s.Name, s.Name)
	}
	if f.Metadata()["format"] != "np" {
		t.Fatal(f.Metadata())
	}
	f.Close()
	if g, err = tensorfile.OpenNPY(npyPath); err != nil {
		t.Fatal(err)
	}
	check(g, "", "npy")
	g.Close()

	for k, b := range want {
		if err := os.WriteFile(filepath.Join(dir, k+".bin"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := runPython(t, "-c", `
import sys, os, numpy as np
import ml_dtypes  # bfloat16 for safetensors' numpy framework
from safetensors import safe_open
d = sys.argv[1]
n = 0
with safe_open(os.path.join(d, "created.safetensors"), framework="numpy") as f:
    assert f.metadata() == {"format": "np"}, f.metadata()
    for k in f.keys():
        want = open(os.path.join(d, k + ".bin"), "rb").read()
        got = f.get_tensor(k)
        assert got.tobytes() == want, k
        n += 1
a = np.load(os.path.join(d, "created.npy"), mmap_mode="r")
assert isinstance(a, np.memmap) and a.shape == (100, 3) and a.dtype == np.float64
assert a.tobytes() == open(os.path.join(d, "npy.bin"), "rb").read()
print("safe_open read %d tensors and np.load(mmap_mode='r') the .npy Go filled in place, bit for bit" % n)
`, dir)
	t.Log(strings.TrimSpace(out))
}

// TestCreateRefuses: what has no file form is refused before anything is
// created.
func TestCreateRefuses(t *testing.T) {
	noLiveMappings(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "x.safetensors")
	for _, c := range []struct {
		specs []tensorfile.Spec
		want  error
	}{
		{[]tensorfile.Spec{{Name: "a", DType: dlpack.Float32, Shape: []int64{1}}, {Name: "a", DType: dlpack.Float32, Shape: []int64{1}}}, tensorfile.ErrFormat},
		{[]tensorfile.Spec{{Name: "__metadata__", DType: dlpack.Float32}}, tensorfile.ErrFormat},
		{[]tensorfile.Spec{{Name: "a", DType: dlpack.Float32, Shape: []int64{-1}}}, tensorfile.ErrLayout},
		{[]tensorfile.Spec{{Name: "a", DType: dlpack.Float32, Shape: []int64{1 << 40, 1 << 40}}}, tensorfile.ErrLayout},
		{[]tensorfile.Spec{{Name: "a", DType: dlpack.DataType{Code: dlpack.CodeFloat, Bits: 4, Lanes: 1}, Shape: []int64{2}}}, tensorfile.ErrDType},
	} {
		if _, err := tensorfile.CreateSafetensors(p, c.specs, nil); !errors.Is(err, c.want) {
			t.Fatalf("%+v: %v, want %v", c.specs, err, c.want)
		}
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%+v: a file was created", c.specs)
		}
	}
	if _, err := tensorfile.CreateNPY(filepath.Join(dir, "x.npy"), dlpack.BFloat16, []int64{2}); !errors.Is(err, tensorfile.ErrDType) {
		t.Fatalf("bfloat16 .npy: %v", err)
	}
}

// A name or metadata string that is not valid UTF-8 is refused before
// anything is written: JSON would carry U+FFFD in its place, so the file
// named the tensor otherwise (and two such names became one, a header
// that OpenSafetensors refuses, written over the previous file).
func TestSafetensorsNamesNotUTF8(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.safetensors")
	if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	x := dlpack.NewArray([]float32{1}, nil)
	for _, c := range []struct {
		names []string
		meta  map[string]string
	}{
		{[]string{"\xff"}, nil},
		{[]string{"\xff", "\xfe"}, nil},
		{[]string{"ok"}, map[string]string{"\xff": "v"}},
		{[]string{"ok"}, map[string]string{"k": "a\xc3"}},
	} {
		var specs []tensorfile.Spec
		var named []tensorfile.Named
		for _, n := range c.names {
			specs = append(specs, tensorfile.Spec{Name: n, DType: dlpack.Float32, Shape: []int64{1}})
			named = append(named, tensorfile.Named{Name: n, Tensor: x})
		}
		f, err := tensorfile.CreateSafetensors(path, specs, c.meta)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("CreateSafetensors %q %q: %v, want ErrFormat naming UTF-8", c.names, c.meta, err)
		}
		var buf bytes.Buffer
		if err := tensorfile.WriteSafetensors(&buf, named, c.meta); !errors.Is(err, tensorfile.ErrFormat) || buf.Len() != 0 {
			t.Errorf("WriteSafetensors %q %q: %v (%d bytes written), want ErrFormat and nothing", c.names, c.meta, err, buf.Len())
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "previous" {
		t.Errorf("the file at the path was replaced: %q", b)
	}
}

// TestSafetensorsHeaderBound: the longest header each writer can make
// under MaxSafetensorsHeader (WriteSafetensors pads to 8 bytes, so
// 100,000,000; CreateSafetensors to 64 from the file's start, so
// 99,999,992) is written and read back; a name one byte longer, padded
// past the bound, is refused with ErrFormat before anything is written
// or created, as OpenSafetensors would refuse the file.
func TestSafetensorsHeaderBound(t *testing.T) {
	noLiveMappings(t)
	dir := t.TempDir()
	empty := dlpack.NewArray([]uint8{}, []int64{0})
	base := len(`{"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`)
	writers := []struct {
		name    string
		longest int // header
		write   func(path, name string) error
	}{
		{"WriteSafetensors", tensorfile.MaxSafetensorsHeader, func(path, name string) error {
			fh, err := os.Create(path)
			if err != nil {
				return err
			}
			defer fh.Close()
			return tensorfile.WriteSafetensors(fh, []tensorfile.Named{{Name: name, Tensor: empty}}, nil)
		}},
		{"CreateSafetensors", tensorfile.MaxSafetensorsHeader - 8, func(path, name string) error {
			f, err := tensorfile.CreateSafetensors(path, []tensorfile.Spec{{Name: name, DType: dlpack.Uint8, Shape: []int64{0}}}, nil)
			if f != nil {
				f.Close()
			}
			return err
		}},
	}
	for _, w := range writers {
		p := filepath.Join(dir, w.name+".safetensors")
		name := strings.Repeat("n", w.longest-base)
		if err := w.write(p, name); err != nil {
			t.Fatalf("%s, a %d-byte header: %v", w.name, w.longest, err)
		}
		if st, err := os.Stat(p); err != nil || st.Size() != int64(8+w.longest) {
			t.Errorf("%s, a %d-byte header: %v, want a file of %d bytes", w.name, w.longest, st, 8+w.longest)
		}
		f, err := tensorfile.OpenSafetensors(p)
		if err != nil {
			t.Fatalf("%s, a %d-byte header: %v", w.name, w.longest, err)
		}
		if n := f.Tensors()[0].Name(); n != name {
			t.Errorf("%s: a name of %d bytes read back as one of %d", w.name, len(name), len(n))
		}
		f.Close()

		p = filepath.Join(dir, w.name+"-over.safetensors")
		err = w.write(p, name+"n")
		if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), "header length = ") {
			t.Errorf("%s, a name one byte longer: %v, want ErrFormat naming the header length", w.name, err)
		}
		if st, err := os.Stat(p); err == nil && st.Size() != 0 {
			t.Errorf("%s, a name one byte longer: wrote %d bytes", w.name, st.Size())
		}
	}
}
