//go:build cgo

package dlarrow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/godlpack/dlpack/minifloat"
)

// imported exports xs from Go and imports it back, as a C producer's
// tensor would arrive.
func imported[T dlpack.Element](t *testing.T, xs []T, shape []int64, opts ...dlpack.ExportOption) dlpack.Foreign {
	t.Helper()
	m, err := dlpack.Export(xs, shape, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.Import(unsafe.Pointer(m))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestToArraySharesMemory(t *testing.T) {
	xs := []float64{1.5, 2.5, 3.5}
	f := imported(t, xs, []int64{3})
	arr, err := dlarrow.ToArray(f)
	if err != nil {
		t.Fatal(err)
	}
	a := arr.(*array.Float64)
	if vs := a.Float64Values(); len(vs) != 3 || &vs[0] != &xs[0] {
		t.Fatalf("values %v at %p, want %v at %p", vs, &vs[0], xs, &xs[0])
	}
	if f.Closed() {
		t.Fatal("the Foreign was closed while the array is alive")
	}
	arr.Retain()
	arr.Release()
	if f.Closed() {
		t.Fatal("the Foreign was closed before the last Release")
	}
	arr.Release()
	if !f.Closed() || dlpack.Outstanding() != 0 {
		t.Fatalf("after the last Release: closed %v, outstanding %d", f.Closed(), dlpack.Outstanding())
	}
}

func TestToArrayTypes(t *testing.T) {
	check := func(t *testing.T, f dlpack.Foreign, want arrow.DataType, str string) {
		t.Helper()
		arr, err := dlarrow.ToArray(f)
		if err != nil {
			t.Fatal(err)
		}
		defer arr.Release()
		if !arrow.TypeEqual(arr.DataType(), want) || arr.String() != str {
			t.Errorf("got %v %s, want %v %s", arr.DataType(), arr, want, str)
		}
	}
	check(t, imported(t, []int8{-1, 2}, []int64{2}), arrow.PrimitiveTypes.Int8, "[-1 2]")
	check(t, imported(t, []int16{-1, 2}, []int64{2}), arrow.PrimitiveTypes.Int16, "[-1 2]")
	check(t, imported(t, []int32{-1, 2}, []int64{2}), arrow.PrimitiveTypes.Int32, "[-1 2]")
	check(t, imported(t, []int64{-1, 2}, []int64{2}), arrow.PrimitiveTypes.Int64, "[-1 2]")
	check(t, imported(t, []uint8{1, 2}, []int64{2}), arrow.PrimitiveTypes.Uint8, "[1 2]")
	check(t, imported(t, []uint16{1, 2}, []int64{2}), arrow.PrimitiveTypes.Uint16, "[1 2]")
	check(t, imported(t, []uint32{1, 2}, []int64{2}), arrow.PrimitiveTypes.Uint32, "[1 2]")
	check(t, imported(t, []uint64{1, 2}, []int64{2}), arrow.PrimitiveTypes.Uint64, "[1 2]")
	check(t, imported(t, []minifloat.Float16{minifloat.Float16(float16.New(1.5).Uint16())}, []int64{1}), arrow.FixedWidthTypes.Float16, "[1.5]")
	check(t, imported(t, []float32{0.5}, []int64{1}), arrow.PrimitiveTypes.Float32, "[0.5]")
	check(t, imported(t, []float64{}, []int64{0}), arrow.PrimitiveTypes.Float64, "[]")
	// N-d: nested FixedSizeLists
	check(t, imported(t, []int32{1, 2, 3, 4, 5, 6}, []int64{3, 2}), arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), "[[1 2] [3 4] [5 6]]")
	check(t, imported(t, []int32{1, 2, 3, 4, 5, 6, 7, 8}, []int64{2, 2, 2}),
		arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32)), "[[[1 2] [3 4]] [[5 6] [7 8]]]")
	// read-only tensors are fine: Arrow never writes
	check(t, imported(t, []int64{7}, []int64{1}, dlpack.ReadOnly()), arrow.PrimitiveTypes.Int64, "[7]")
	if n := dlpack.Outstanding(); n != 0 {
		t.Errorf("outstanding exports %d", n)
	}
}

// Refusals leave the Foreign to the caller, open.
func TestToArrayRefusals(t *testing.T) {
	cases := []struct {
		name     string
		f        dlpack.Foreign
		sentinel error
		msg      string // in the error
	}{
		{"strided", imported(t, []float32{1, 2, 3, 4}, []int64{2}, dlpack.WithStrides(2)), dlpack.ErrLayout, ""},
		{"bool", imported(t, []bool{true}, []int64{1}), dlarrow.ErrBitPacked, "CopyToArray packs"},
		{"complex", imported(t, []complex64{1}, []int64{1}), dlarrow.ErrType, "float16, float32 and float64 (CopyToArray also packs bool)"},
		{"0-d", imported(t, []float32{1}, []int64{}), dlpack.ErrShape, ""},
		{"zero width", imported(t, []float32{}, []int64{2, 0}), dlpack.ErrShape, ""},
	}
	for _, c := range cases {
		arr, err := dlarrow.ToArray(c.f)
		if !errors.Is(err, c.sentinel) || arr != nil || !strings.Contains(fmt.Sprint(err), c.msg) {
			t.Errorf("%s: ToArray = %v, %v; want %v saying %q", c.name, arr, err, c.sentinel, c.msg)
		}
		if c.f.Closed() {
			t.Errorf("%s: the refused Foreign was closed", c.name)
		}
		c.f.Close()
	}
}

func TestCopyToArray(t *testing.T) {
	mem := checked(t)
	// a transposed 2x3 view of a 3x2 matrix
	f := imported(t, []float64{1, 2, 3, 4, 5, 6}, []int64{2, 3}, dlpack.WithStrides(1, 2))
	defer f.Close()
	arr, err := dlarrow.CopyToArray(f, mem)
	if err != nil {
		t.Fatal(err)
	}
	if s := arr.String(); s != "[[1 3 5] [2 4 6]]" {
		t.Errorf("CopyToArray = %s", s)
	}
	arr.Release()

	b := imported(t, []bool{true, false, true, true, false, false, false, false, true}, []int64{9})
	defer b.Close()
	arr, err = dlarrow.CopyToArray(b, mem)
	if err != nil {
		t.Fatal(err)
	}
	if s := arr.String(); s != "[true false true true false false false false true]" {
		t.Errorf("CopyToArray(bool) = %s", s)
	}
	arr.Release()

	rev := imported(t, []int16{1, 2, 3}, []int64{3}, dlpack.WithStrides(-1), dlpack.WithOffset(2))
	defer rev.Close()
	arr, err = dlarrow.CopyToArray(rev, mem)
	if err != nil {
		t.Fatal(err)
	}
	if s := arr.String(); s != "[3 2 1]" {
		t.Errorf("CopyToArray(reversed) = %s", s)
	}
	arr.Release()
}

func TestToTensor(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6}
	f := imported(t, xs, []int64{2, 3}, dlpack.WithStrides(1, 2))
	tt, err := dlarrow.ToTensor(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := tt.Strides(); len(s) != 2 || s[0] != 4 || s[1] != 8 || !tt.IsColMajor() {
		t.Errorf("strides %v col-major %v, want [4 8] true", s, tt.IsColMajor())
	}
	ft := tt.(interface{ Float32Values() []float32 })
	if vs := ft.Float32Values(); &vs[0] != &xs[0] {
		t.Error("the Arrow tensor does not share the memory")
	}
	tt.Release()
	if !f.Closed() {
		t.Error("Release did not close the Foreign")
	}
	h := imported(t, []minifloat.Float16{1}, []int64{1})
	defer h.Close()
	if _, err := dlarrow.ToTensor(h); !errors.Is(err, dlarrow.ErrType) {
		t.Errorf("ToTensor(float16): %v", err)
	}
}

// Device memory is refused by every way in, and the deleter still runs
// once, when the caller closes the Foreign.
func TestIntoArrowRefusesDeviceMemory(t *testing.T) {
	mem := checked(t)
	ct := cshim.Make(cshim.Spec{Major: 1, DeviceType: int32(dlpack.CUDA), NDim: 1, Code: uint8(dlpack.CodeFloat), Bits: 32, Lanes: 1,
		Shape: []int64{4}, Strides: []int64{1}, DataAddr: 0x10000})
	f, err := dlpack.Import(ct.Ptr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dlarrow.ToArray(f); !errors.Is(err, dlpack.ErrDevice) {
		t.Errorf("ToArray of CUDA memory: %v", err)
	}
	if _, err := dlarrow.ToTensor(f); !errors.Is(err, dlpack.ErrDevice) {
		t.Errorf("ToTensor of CUDA memory: %v", err)
	}
	if _, err := dlarrow.CopyToArray(f, mem); !errors.Is(err, dlpack.ErrDevice) {
		t.Errorf("CopyToArray of CUDA memory: %v", err)
	}
	f.Close()
	if n := ct.Deletes(); n != 1 {
		t.Errorf("deleter ran %d times", n)
	}
}
