package dlpack

import (
	"math"
	"math/big"
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
