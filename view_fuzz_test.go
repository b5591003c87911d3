//go:build cgo

package dlpack_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// FuzzStridedView exports a window of a Go slice with fuzzed shape,
// strides (zero and negative included) and offset, imports it back, and
// checks every way of reading it against brute force: View.All, View.At,
// CopyTo, Slice (when compact) and the C consumer's sum. Invariants: Export
// accepts exactly the layouts that stay inside the slice, no read leaves
// it (checkptr and -asan would see), and every export is released once.
func FuzzStridedView(f *testing.F) {
	f.Add(uint8(2), []byte{3, 4}, []byte{4, 1}, uint16(0))
	f.Add(uint8(3), []byte{3, 2, 2}, []byte{0xfc, 0, 1}, uint16(10)) // -4, 0, 1
	f.Add(uint8(1), []byte{5}, []byte{0xfe}, uint16(9))              // reversed step slice
	f.Add(uint8(0), []byte{}, []byte{}, uint16(7))
	f.Add(uint8(2), []byte{0, 9}, []byte{3, 1}, uint16(200))
	f.Fuzz(func(t *testing.T, ndim uint8, shapeB, strideB []byte, offset uint16) {
		const n = 64
		data := make([]float64, n)
		for i := range data {
			data[i] = float64(i)
		}
		nd := int(ndim % 5)
		shape := make([]int64, nd)
		strides := make([]int64, nd)
		for i := 0; i < nd; i++ {
			if i < len(shapeB) {
				shape[i] = int64(shapeB[i] % 6)
			}
			if i < len(strideB) {
				strides[i] = int64(int8(strideB[i])) % 16
			}
		}
		first := int(offset % (n + 4))
		// Brute force: the flat row-major list of element indexes.
		var want []int
		numel := 1
		for _, d := range shape {
			numel *= int(d)
		}
		inside := true
		idx := make([]int64, nd)
		for k := 0; k < numel; k++ {
			off := int64(first)
			for i := range idx {
				off += idx[i] * strides[i]
			}
			if off < 0 || off >= n {
				inside = false
			}
			want = append(want, int(off))
			for i := nd - 1; i >= 0; i-- {
				if idx[i]++; idx[i] < shape[i] {
					break
				}
				idx[i] = 0
			}
		}
		if numel > 0 && first >= n {
			inside = false
		}
		m, err := dlpack.Export(data, shape, dlpack.WithStrides(strides...), dlpack.WithOffset(first))
		if err != nil {
			if inside && numel > 0 {
				t.Fatalf("refused a layout inside the slice: %v", err)
			}
			if !errors.Is(err, dlpack.ErrShape) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !inside && numel > 0 {
			t.Fatalf("accepted shape %v strides %v offset %d outside a slice of %d", shape, strides, first, n)
		}
		sum := 0.0
		for _, i := range want {
			sum += data[i]
		}
		if c := cshim.SumVersioned(unsafe.Pointer(m)); c != sum {
			t.Fatalf("C sum %v, want %v", c, sum)
		}
		err = dlpack.Borrow(unsafe.Pointer(m), func(f dlpack.Foreign) error {
			v, err := dlpack.ViewOf[float64](f)
			if err != nil {
				return err
			}
			k := 0
			for i, x := range v.All() {
				if i != k || x != data[want[k]] {
					t.Fatalf("All: element %d = %v, want index %d value %v", i, x, k, data[want[k]])
				}
				k++
			}
			if k != numel {
				t.Fatalf("All yielded %d elements, want %d", k, numel)
			}
			if numel > 0 {
				at := make([]int, nd)
				for i := range at {
					at[i] = int(shape[i]) - 1
				}
				x, err := v.At(at...)
				if err != nil || x != data[want[numel-1]] {
					t.Fatalf("At(last) = %v, %v", x, err)
				}
			}
			got := make([]float64, numel)
			if _, err := v.CopyTo(got); err != nil {
				return err
			}
			for i := range got {
				if got[i] != data[want[i]] {
					t.Fatalf("CopyTo[%d] = %v", i, got[i])
				}
			}
			if f.IsContiguous() {
				xs, err := dlpack.Slice[float64](f)
				if err != nil || len(xs) != numel {
					t.Fatalf("Slice of a compact view: %d, %v", len(xs), err)
				}
				for i := range xs {
					if xs[i] != data[want[i]] {
						t.Fatalf("Slice[%d] = %v", i, xs[i])
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if dlpack.Outstanding() != 0 {
			t.Fatal("export not released")
		}
	})
}
