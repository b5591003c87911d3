package minifloat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// Fixed reference values of each format.
func TestReferenceValues(t *testing.T) {
	f16cases := map[float32]Float16{1: 0x3c00, -2: 0xc000, 65504: 0x7bff, 0.5: 0x3800,
		float32(math.Ldexp(1, -24)): 0x0001, float32(math.Ldexp(1, -14)): 0x0400, 65520: 0x7c00, 1e9: 0x7c00}
	for x, want := range f16cases {
		assert.Equal(t, want, Float16From32(x), "float16(%v)", x)
	}
	bfcases := map[float32]BFloat16{1: 0x3f80, -1: 0xbf80, 3.140625: 0x4049,
		math.Float32frombits(0x3f808000): 0x3f80, math.Float32frombits(0x3f818000): 0x3f82, math.MaxFloat32: 0x7f80}
	for x, want := range bfcases {
		assert.Equal(t, want, BFloat16From32(x), "bfloat16(%v)", x)
	}
	e4cases := map[float32]E4M3FN{1: 0x38, -1: 0xb8, 448: 0x7e, -448: 0xfe, 464: 0x7e, 465: 0x7f, 0.001953125: 0x01,
		float32(math.Ldexp(1, -6)): 0x08, 2: 0x40, float32(math.Inf(1)): 0x7f, float32(math.Inf(-1)): 0xff}
	for x, want := range e4cases {
		assert.Equal(t, want, E4M3FNFrom32(x), "e4m3fn(%v)", x)
	}
	e5cases := map[float32]E5M2{1: 0x3c, -1: 0xbc, 57344: 0x7b, 61440: 0x7c, 61439: 0x7b,
		float32(math.Ldexp(1, -16)): 0x01, float32(math.Inf(1)): 0x7c, float32(math.Inf(-1)): 0xfc}
	for x, want := range e5cases {
		assert.Equal(t, want, E5M2From32(x), "e5m2(%v)", x)
	}
	nan := float32(math.NaN())
	assert.True(t, Float16From32(nan).IsNaN())
	assert.True(t, BFloat16From32(nan).IsNaN())
	assert.True(t, E4M3FNFrom32(nan).IsNaN())
	assert.True(t, E5M2From32(nan).IsNaN())
	assert.True(t, math.IsNaN(float64(E4M3FN(0x7f).Float32())))
	assert.Equal(t, float32(448), E4M3FN(0x7e).Float32())
	assert.True(t, math.IsInf(float64(E5M2(0xfc).Float32()), -1))
	assert.True(t, math.Signbit(float64(Float16From32(float32(math.Copysign(0, -1))).Float32())), "negative zero kept")
}

// randomFloat32 spreads samples over every exponent, plus near-ties.
func randomFloat32(r *rand.Rand) float32 {
	switch r.IntN(4) {
	case 0:
		return math.Float32frombits(r.Uint32())
	case 1: // around the small formats' range
		return float32(math.Ldexp(r.Float64()*2-1, r.IntN(40)-24))
	default: // exact midpoints of 16-bit values, and their neighbours
		b := math.Float32frombits(r.Uint32()&0xffff0000 | 0x8000)
		return math.Nextafter32(b, float32(r.IntN(3)-1)*float32(math.Inf(1)))
	}
}

// Float16 against github.com/x448/float16, an independent implementation
// (round to nearest even): every bit pattern decoded, and 300,000
// float32 values encoded.
func TestFloat16MatchesReference(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		got, want := Float16(b).Float32(), float16.Frombits(uint16(b)).Float32()
		if math.IsNaN(float64(want)) {
			require.True(t, math.IsNaN(float64(got)), "%#04x", b)
			continue
		}
		require.Equal(t, math.Float32bits(want), math.Float32bits(got), "decode %#04x", b)
		require.Equal(t, Float16(b), Float16From32(got), "round trip %#04x", b)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300_000; i++ {
		x := randomFloat32(r)
		got, want := Float16From32(x), float16.Fromfloat32(x)
		if want.IsNaN() {
			require.True(t, got.IsNaN(), "%v", x)
			continue
		}
		require.Equal(t, uint16(want), uint16(got), "encode %v (%#08x)", x, math.Float32bits(x))
	}
}

// BFloat16 against the well-known integer rounding of the float32 bits.
func TestBFloat16MatchesReference(t *testing.T) {
	ref := func(x float32) uint16 {
		b := math.Float32bits(x)
		return uint16((b + 0x7fff + (b>>16)&1) >> 16)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300_000; i++ {
		x := randomFloat32(r)
		if x != x {
			require.True(t, BFloat16From32(x).IsNaN())
			continue
		}
		require.Equal(t, ref(x), uint16(BFloat16From32(x)), "encode %v (%#08x)", x, math.Float32bits(x))
	}
	for b := 0; b < 1<<16; b++ {
		v := BFloat16(b)
		if v.IsNaN() {
			continue
		}
		require.Equal(t, v, BFloat16From32(v.Float32()))
	}
}

// nearest is a brute-force oracle for an 8-bit format: the non-NaN code
// closest to x, ties to the even code, with the value one step above the
// largest finite one standing for overflow (infinity, or NaN for FN).
func nearest(f format, x float64) uint32 {
	if x != x {
		return f.nan()
	}
	type cand struct {
		v    float64
		code uint32
	}
	var cs []cand
	for c := uint32(0); c < 256; c++ {
		v := f.decode(c)
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			cs = append(cs, cand{v, c})
		}
	}
	top := f.maxFinite()
	ulp := math.Ldexp(1, f.maxExp()-int(f.mbits))
	over := f.expMask() // +Inf, even
	if f.finiteOnly {
		over = f.nan() // the NaN slot, odd mantissa
	}
	cs = append(cs, cand{top + ulp, over}, cand{-(top + ulp), over | f.signBit()})
	if math.Abs(x) > top+ulp {
		return cs[len(cs)-2].code | map[bool]uint32{true: f.signBit()}[x < 0]
	}
	best := cs[0]
	for _, c := range cs[1:] {
		d, bd := math.Abs(c.v-x), math.Abs(best.v-x)
		if d < bd || (d == bd && c.code&1 == 0 && best.code&1 == 1) {
			best = c
		}
	}
	if best.v == 0 && math.Signbit(x) {
		return f.signBit()
	}
	if best.v == 0 {
		return 0
	}
	return best.code
}

func TestFloat8MatchBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for name, f := range map[string]format{"e4m3fn": e4m3fn, "e5m2": e5m2} {
		var xs []float64
		for c := uint32(0); c < 256; c++ { // every value, and every midpoint
			v := f.decode(c)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			xs = append(xs, v)
			for d := uint32(0); d < 256; d++ {
				w := f.decode(d)
				if !math.IsNaN(w) && !math.IsInf(w, 0) && w > v {
					xs = append(xs, v+(w-v)/2)
					break
				}
			}
		}
		for i := 0; i < 30_000; i++ {
			xs = append(xs, float64(randomFloat32(r)))
		}
		for _, x := range xs {
			x = float64(float32(x))
			got := f.encode(x)
			want := nearest(f, x)
			if math.IsNaN(x) { // NaN-ness is tested in TestReferenceValues; the sign bit is kept
				require.Equal(t, f.expMask(), got&f.expMask(), "%s(NaN)", name)
				continue
			}
			require.Equal(t, want, got, "%s(%v)", name, x)
		}
	}
}

// E5M2 is the top byte of a float16: decoding must agree exactly.
func TestE5M2IsTopByteOfFloat16(t *testing.T) {
	for b := 0; b < 256; b++ {
		got, want := E5M2(b).Float32(), Float16(b<<8).Float32()
		if math.IsNaN(float64(want)) {
			require.True(t, E5M2(b).IsNaN())
			continue
		}
		require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%#02x", b)
	}
}
