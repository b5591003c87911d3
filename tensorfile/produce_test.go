//go:build cgo

package tensorfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/godlpack/dlpack/tensorfile"
)

func goSafetensors(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w := dlpack.NewArray([]float64{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	b := dlpack.NewArray([]float32{0.5, 1.5}, []int64{2})
	if err := tensorfile.WriteSafetensors(&buf, []tensorfile.Named{{Name: "w", Tensor: w}, {Name: "b", Tensor: b}}, nil); err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "a.safetensors", buf.Bytes())
}

// Tensors handed to C by Produce share the mapping, read-only; released on
// C threads after the File's Close, the last release unmaps, once.
func TestProduceReleasedOnCThreads(t *testing.T) {
	noLiveMappings(t)
	f, err := tensorfile.OpenSafetensors(goSafetensors(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr, size := f.MappedRange()
	live, unmaps := tensorfile.LiveMappings(), tensorfile.Unmaps()
	var ptrs []unsafe.Pointer
	for range 100 {
		for _, tn := range f.Tensors() {
			m, err := dlpack.Produce(tn, dlpack.Request{})
			if err != nil {
				t.Fatal(err)
			}
			dt := &m.Versioned.DLTensor
			if dt.Data < addr || dt.Data >= addr+uintptr(size) || m.Versioned.Flags&dlpack.FlagReadOnly == 0 || m.Versioned.Flags&dlpack.FlagIsCopied != 0 {
				t.Fatalf("%v: data %#x flags %v outside the mapping [%#x, +%d) or not read-only", tn, dt.Data, m.Versioned.Flags, addr, size)
			}
			ptrs = append(ptrs, m.Pointer())
		}
	}
	// Data order: w (float64) before b (float32), as the writer lays out.
	if sw, sb := cshim.SumVersioned(ptrs[0]), cshim.SumVersioned(ptrs[1]); sw != 21 || sb != 2 {
		t.Fatalf("C read sums %v and %v, want 21 and 2", sw, sb)
	}
	f.Close()
	if tensorfile.LiveMappings() != live || tensorfile.Unmaps() != unmaps {
		t.Fatal("unmapped while C holds tensors")
	}
	cshim.ReleaseOnThreads(ptrs, 4, false)
	if tensorfile.LiveMappings() != live-1 || tensorfile.Unmaps() != unmaps+1 {
		t.Fatalf("after the C releases: live %d, unmaps %d", tensorfile.LiveMappings()-live, tensorfile.Unmaps()-unmaps)
	}
	if n := dlpack.Outstanding(); n != 0 {
		t.Fatalf("%d exports outstanding", n)
	}
}

// A read-only mapping never becomes a writable tensor: a writing request or
// a legacy one (which cannot carry the read-only flag) gets a copy, outside
// the mapping, or with CopyNever an error.
func TestReadOnlyMappingCopiesOrRefuses(t *testing.T) {
	noLiveMappings(t)
	f, err := tensorfile.OpenSafetensors(goSafetensors(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr, size := f.MappedRange()
	tn, _ := f.Tensor("w")
	inside := func(a uintptr) bool { return a >= addr && a < addr+uintptr(size) }

	x, err := dlpack.FromRequest(tn, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	xs, err := dlpack.Slice[float64](x)
	if err != nil || inside(uintptr(unsafe.Pointer(&xs[0]))) || xs[5] != 6 {
		t.Fatalf("writable request: %v %v (must be a copy)", xs, err)
	}
	xs[0] = 100 // the copy is ours
	x.Close()

	m, err := dlpack.Produce(tn, dlpack.Request{Legacy: true}) // legacy
	if err != nil {
		t.Fatal(err)
	}
	if inside(m.Legacy.DLTensor.Data) {
		t.Fatal("a legacy tensor shares a read-only mapping")
	}
	m.Close()

	for _, req := range []dlpack.Request{
		{MaxVersion: dlpack.CurrentVersion, Writable: true, Copy: dlpack.CopyNever},
		{Legacy: true, Copy: dlpack.CopyNever},
	} {
		if _, err := dlpack.Produce(tn, req); !errors.Is(err, dlpack.ErrReadOnly) {
			t.Errorf("%+v: %v, want ErrReadOnly", req, err)
		}
	}
	y, err := dlpack.From(tn)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if ys, _ := dlpack.ReadOnlySlice[float64](y); ys[0] != 1 || !inside(uintptr(unsafe.Pointer(&ys[0]))) {
		t.Fatalf("the file changed or is not shared: %v", ys)
	}
}

// The writers take any producer and any strides (negative, zero), and
// refuse what the format cannot hold before writing anything.
func TestWritersStridesAndRefusals(t *testing.T) {
	noLiveMappings(t)
	// A 3x2 view with negative row stride and a broadcast (zero) column:
	// rows 2, 1, 0 of a 3x4 matrix, element (i, j) = data[8 - 4i + 0j + 1].
	data := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	a := &dlpack.Array[int32]{Data: data, Shape: []int64{3, 2}, Strides: []int64{-4, 0}, Offset: 9}
	var buf bytes.Buffer
	if err := tensorfile.WriteNPY(&buf, a); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "s.npy")
	os.WriteFile(p, buf.Bytes(), 0o644)
	f, err := tensorfile.OpenNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := dlpack.From(f.Tensors()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got, _ := dlpack.ReadOnlySlice[int32](x)
	if want := []int32{9, 9, 5, 5, 1, 1}; !equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}

	// A 0-d tensor and an empty one, through .npy and safetensors.
	scalar := &dlpack.Array[float32]{Data: []float32{7}, Shape: []int64{}}
	empty := &dlpack.Array[float32]{Data: nil, Shape: []int64{0, 3}}
	for _, src := range []*dlpack.Array[float32]{scalar, empty} {
		buf.Reset()
		if err := tensorfile.WriteNPY(&buf, src); err != nil {
			t.Fatal(err)
		}
		g, err := tensorfile.OpenNPY(writeTemp(t, "z.npy", buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		tn := g.Tensors()[0]
		if !equal(tn.Shape(), src.Shape) || tn.NBytes() != int64(4*len(src.Data)) {
			t.Errorf("%v written as %v", src.Shape, tn)
		}
		g.Close()
	}
	buf.Reset()
	if err := tensorfile.WriteSafetensors(&buf, []tensorfile.Named{{Name: "s", Tensor: scalar}, {Name: "e", Tensor: empty}}, nil); err != nil {
		t.Fatal(err)
	}
	g, err := tensorfile.OpenSafetensors(writeTemp(t, "z.safetensors", buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := g.Tensor("s"); s == nil || len(s.Shape()) != 0 || s.NBytes() != 4 {
		t.Errorf("scalar read back as %v", s)
	}
	g.Close()

	// A Buffer (C memory) as a source.
	bf, err := dlpack.NewBuffer[minifloat.BFloat16]([]int64{2})
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	bf.Data()[1] = minifloat.BFloat16From32(2.5)
	buf.Reset()
	if err := tensorfile.WriteSafetensors(&buf, []tensorfile.Named{{Name: "bf", Tensor: bf}}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte{0, 0, 0x20, 0x40}) {
		t.Fatalf("bfloat16 data % x", buf.Bytes()[buf.Len()-4:])
	}

	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"npy of bfloat16", tensorfile.WriteNPY(&bytes.Buffer{}, bf), tensorfile.ErrDType},
		{"npz of bfloat16", tensorfile.WriteNPZ(&bytes.Buffer{}, []tensorfile.Named{{Name: "x", Tensor: bf}}, false), tensorfile.ErrDType},
		{"safetensors with a repeated name", tensorfile.WriteSafetensors(&bytes.Buffer{}, []tensorfile.Named{{Name: "x", Tensor: a}, {Name: "x", Tensor: a}}, nil), tensorfile.ErrFormat},
		{"safetensors named __metadata__", tensorfile.WriteSafetensors(&bytes.Buffer{}, []tensorfile.Named{{Name: "__metadata__", Tensor: a}}, nil), tensorfile.ErrFormat},
		{"safetensors of complex128", tensorfile.WriteSafetensors(&bytes.Buffer{}, []tensorfile.Named{{Name: "c", Tensor: dlpack.NewArray([]complex128{1}, nil)}}, nil), tensorfile.ErrDType},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
