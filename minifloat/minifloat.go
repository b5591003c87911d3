// Package minifloat holds the reduced-precision element types that machine
// learning frameworks exchange through DLPack: IEEE float16, bfloat16, and
// the 8-bit floats float8_e4m3fn and float8_e5m2. Each is its bit pattern
// (a uint16 or uint8), so a slice of them views tensor memory directly; see
// dlpack.Slice.
//
// Conversions are exact where they can be. Float32 and Float64 widen
// exactly. From32 rounds to the nearest representable value, ties to even
// mantissa, in one step (no double rounding). Formats with infinities
// (Float16, BFloat16, E5M2) turn values beyond their range into ±Inf;
// E4M3FN has no infinities, so out-of-range values and ±Inf become NaN, as
// in PyTorch and ml_dtypes. NaN stays NaN (its payload is not kept).
package minifloat

import "math"

// Float16 is an IEEE 754 binary16 value: 1 sign, 5 exponent, 10 mantissa
// bits, bias 15.
type Float16 uint16

// BFloat16 is a bfloat16 value: the top 16 bits of a float32 (1 sign, 8
// exponent, 7 mantissa bits, bias 127).
type BFloat16 uint16

// E4M3FN is a float8_e4m3fn value: 1 sign, 4 exponent, 3 mantissa bits,
// bias 7, no infinities; S.1111.111 is NaN, so the largest finite value is
// 448.
type E4M3FN uint8

// E5M2 is a float8_e5m2 value: 1 sign, 5 exponent, 2 mantissa bits, bias
// 15, with IEEE infinities and NaNs (the top byte of a float16).
type E5M2 uint8

// format describes a binary floating-point format of at most 16 bits.
type format struct {
	ebits, mbits uint
	bias         int
	finiteOnly   bool // no infinities; only all-ones exponent and mantissa is NaN (the "FN" formats)
}

var (
	f16    = format{ebits: 5, mbits: 10, bias: 15}
	bf16   = format{ebits: 8, mbits: 7, bias: 127}
	e4m3fn = format{ebits: 4, mbits: 3, bias: 7, finiteOnly: true}
	e5m2   = format{ebits: 5, mbits: 2, bias: 15}
)

func (f format) signBit() uint32 { return 1 << (f.ebits + f.mbits) }
func (f format) expMask() uint32 { return (1<<f.ebits - 1) << f.mbits }
func (f format) manMask() uint32 { return 1<<f.mbits - 1 }

// nan is the format's canonical quiet NaN (sign clear).
func (f format) nan() uint32 {
	if f.finiteOnly {
		return f.expMask() | f.manMask()
	}
	return f.expMask() | 1<<(f.mbits-1)
}

// maxExp is the largest unbiased exponent of a finite value.
func (f format) maxExp() int {
	if f.finiteOnly {
		return 1<<f.ebits - 1 - f.bias
	}
	return 1<<f.ebits - 2 - f.bias
}

// maxFinite is the largest finite value.
func (f format) maxFinite() float64 {
	m := float64(int(1)<<(f.mbits+1) - 1) // all mantissa bits set, with the implicit 1
	if f.finiteOnly {
		m-- // all-ones mantissa at the top exponent is NaN
	}
	return math.Ldexp(m, f.maxExp()-int(f.mbits))
}

// decode returns the value of bit pattern b exactly.
func (f format) decode(b uint32) float64 {
	sign := 1.0
	if b&f.signBit() != 0 {
		sign = -1
	}
	e := int((b & f.expMask()) >> f.mbits)
	m := b & f.manMask()
	switch {
	case f.finiteOnly && e == 1<<f.ebits-1 && m == f.manMask():
		return math.NaN()
	case !f.finiteOnly && e == 1<<f.ebits-1:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case e == 0: // zero or subnormal
		return sign * math.Ldexp(float64(m), 1-f.bias-int(f.mbits))
	}
	return sign * math.Ldexp(float64(m|1<<f.mbits), e-f.bias-int(f.mbits))
}

// encode rounds x to the nearest value of the format, ties to even.
// x is a float32 widened exactly, so this is a single rounding.
func (f format) encode(x float64) uint32 {
	var sign uint32
	if math.Signbit(x) {
		sign = f.signBit()
		x = -x
	}
	switch {
	case x != x:
		return sign | f.nan()
	case math.IsInf(x, 1):
		if f.finiteOnly {
			return sign | f.nan()
		}
		return sign | f.expMask()
	case x == 0:
		return sign
	}
	minExp := 1 - f.bias // unbiased exponent of the smallest normal
	_, e := math.Frexp(x)
	e-- // x = 1.m * 2^e
	if e < minExp {
		e = minExp // subnormal: the quantum of the smallest normal
	}
	// x / quantum is exact in float64 (a power-of-two scaling).
	q := math.RoundToEven(math.Ldexp(x, int(f.mbits)-e))
	v := math.Ldexp(q, e-int(f.mbits))
	if v > f.maxFinite() {
		if f.finiteOnly {
			return sign | f.nan()
		}
		return sign | f.expMask()
	}
	if v == 0 {
		return sign
	}
	if v < math.Ldexp(1, minExp) { // subnormal
		return sign | uint32(q)
	}
	_, e2 := math.Frexp(v) // rounding may have carried into the next exponent
	e2--
	man := uint32(math.Ldexp(v, int(f.mbits)-e2)) &^ (1 << f.mbits)
	return sign | uint32(e2+f.bias)<<f.mbits | man
}

// Float16From32 rounds x to the nearest Float16 (ties to even).
func Float16From32(x float32) Float16 { return Float16(f16.encode(float64(x))) }

// Float32 returns h exactly.
func (h Float16) Float32() float32 { return float32(f16.decode(uint32(h))) }

// Float64 returns h exactly.
func (h Float16) Float64() float64 { return f16.decode(uint32(h)) }

// IsNaN reports whether h is a NaN.
func (h Float16) IsNaN() bool { return h&0x7c00 == 0x7c00 && h&0x03ff != 0 }

// BFloat16From32 rounds x to the nearest BFloat16 (ties to even).
func BFloat16From32(x float32) BFloat16 { return BFloat16(bf16.encode(float64(x))) }

// Float32 returns b exactly.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Float64 returns b exactly.
func (b BFloat16) Float64() float64 { return float64(b.Float32()) }

// IsNaN reports whether b is a NaN.
func (b BFloat16) IsNaN() bool { return b&0x7f80 == 0x7f80 && b&0x007f != 0 }

// E4M3FNFrom32 rounds x to the nearest E4M3FN (ties to even); values
// beyond ±448 after rounding, ±Inf and NaN give NaN.
func E4M3FNFrom32(x float32) E4M3FN { return E4M3FN(e4m3fn.encode(float64(x))) }

// Float32 returns v exactly.
func (v E4M3FN) Float32() float32 { return float32(e4m3fn.decode(uint32(v))) }

// Float64 returns v exactly.
func (v E4M3FN) Float64() float64 { return e4m3fn.decode(uint32(v)) }

// IsNaN reports whether v is a NaN (S.1111.111).
func (v E4M3FN) IsNaN() bool { return v&0x7f == 0x7f }

// E5M2From32 rounds x to the nearest E5M2 (ties to even).
func E5M2From32(x float32) E5M2 { return E5M2(e5m2.encode(float64(x))) }

// Float32 returns v exactly.
func (v E5M2) Float32() float32 { return float32(e5m2.decode(uint32(v))) }

// Float64 returns v exactly.
func (v E5M2) Float64() float64 { return e5m2.decode(uint32(v)) }

// IsNaN reports whether v is a NaN.
func (v E5M2) IsNaN() bool { return v&0x7c == 0x7c && v&0x03 != 0 }
