package dlpack

import (
	"math"
	"math/big"
	"reflect"
	"testing"
)

// TestMulCheck compares the overflow-checked product with big.Int around
// every boundary of the fast and the wide path.
func TestMulCheck(t *testing.T) {
	var vals []int64
	for _, v := range []int64{0, 1, 2, 3, 1 << 31, 1 << 32, 1 << 62, 3037000499, 3037000500, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32} {
		for _, d := range []int64{-2, -1, 0, 1, 2} {
			vals = append(vals, v+d, -(v + d))
		}
	}
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	for _, a := range vals {
		for _, b := range vals {
			want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
			wantOK := want.Cmp(lo) >= 0 && want.Cmp(hi) <= 0
			got, ok := mulCheck(a, b)
			if ok != wantOK || (ok && got != want.Int64()) {
				t.Fatalf("mulCheck(%d, %d) = %d, %v; want %v, %v", a, b, got, ok, want, wantOK)
			}
		}
	}
}

// TestCompactDims compares checkDims with NULL strides (the one-pass path
// for dimensions and strides below 2^31) with the same shape given its
// row-major strides (the general path), around the one-pass path's bounds:
// the same shape and strides out, the same extent, the same errors.
func TestCompactDims(t *testing.T) {
	dims := []int64{0, 1, 2, 7, 1<<31 - 1, 1 << 31, 1 << 32, math.MaxInt64, -1, math.MinInt64}
	var shapes [][]int64
	for _, a := range dims {
		shapes = append(shapes, []int64{a})
		for _, b := range dims {
			shapes = append(shapes, []int64{a, b}, []int64{b, 3, a}, []int64{65536, a, 32768, b})
		}
	}
	shapes = append(shapes, nil, []int64{}, []int64{1 << 20, 1 << 20, 1 << 20}, []int64{46341, 46341})
	fast := make([]int64, 8)
	for _, shape := range shapes {
		n := len(shape)
		gotE, gotErr := checkDims(shape, nil, fast[:n], fast[n:2*n], "")
		// The row-major strides, computed as the general path does; a
		// shape whose strides overflow must fail on both paths.
		strides := make([]int64, n)
		acc, overflow := int64(1), false
		for i := n - 1; i >= 0; i-- {
			strides[i] = acc
			var ok bool
			if acc, ok = mulCheck(acc, max(shape[i], 1)); !ok {
				overflow = true
			}
		}
		numel, bad := int64(1), false
		for _, d := range shape {
			var ok bool
			if numel, ok = mulCheck(numel, d); !ok || d < 0 {
				bad = true
			}
		}
		if wantErr := bad || overflow; (gotErr != nil) != wantErr {
			t.Errorf("shape %v: error %v, want one: %v", shape, gotErr, wantErr)
			continue
		}
		if gotErr != nil {
			continue
		}
		slow := make([]int64, 8)
		wantE, err := checkDims(shape, strides, slow[:n], slow[n:2*n], "")
		if err != nil {
			t.Errorf("shape %v: general path: %v", shape, err)
			continue
		}
		if gotE != wantE {
			t.Errorf("shape %v: extent %+v, want %+v", shape, gotE, wantE)
		}
		for i := 0; i < 2*n; i++ {
			if fast[i] != slow[i] {
				t.Errorf("shape %v: out %v, want %v", shape, fast[:2*n], slow[:2*n])
				break
			}
		}
	}
}

// TestCompactGeometry checks that compactGeometry, where it takes a
// description, fills the checks exactly as checkGeometry does, and that it
// leaves every description checkGeometry refuses to checkGeometry.
func TestCompactGeometry(t *testing.T) {
	shapes := [][]int64{nil, {}, {0}, {1}, {6}, {7}, {2, 3}, {3, 0, 2}, {1, 1, 6}, {2, 2, 2, 2, 2}, {-1, 2}, {1 << 31, 0}, {1, 2, 3, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1}}
	base := uintptr(1 << 20)
	taken := 0
	for _, shape := range shapes {
		for _, elems := range []int64{0, 5, 6, 7, 64} {
			for _, off := range []uintptr{0, 4, 16} {
				for _, ro := range []bool{false, true} {
					var fast, slow checked
					fastDims, slowDims := make([]int64, 16), make([]int64, 16)
					fast.dtype, slow.dtype = Float32, Float32
					size := uintptr(elems)*4 + off
					if !fast.compactGeometry(base, elems, off, shape, ro, fastDims) {
						continue
					}
					taken++
					if err := slow.checkGeometry(base, false, size, uint64(off), shape, nil, ro, slowDims); err != nil {
						t.Errorf("shape %v, %d elements, offset %d: taken, but checkGeometry: %v", shape, elems, off, err)
						continue
					}
					if !reflect.DeepEqual(fast, slow) {
						t.Errorf("shape %v, %d elements, offset %d, read-only %v:\n got %+v\nwant %+v", shape, elems, off, ro, fast, slow)
					}
				}
			}
		}
	}
	if taken < 100 {
		t.Fatalf("compactGeometry took only %d descriptions", taken)
	}
}
