package dlpack

import (
	"fmt"
	"strconv"
	"strings"
	"structs"

	"github.com/godlpack/dlpack/minifloat"
)

// DataTypeCode mirrors DLDataTypeCode. It is a plain integer, not a closed
// enum: a newer producer may send a code this package does not know, which
// IsKnown reports and validation rejects.
type DataTypeCode uint8

// The type codes of DLPack 1.3, and the one the specification's main
// branch has added since (Bcomplex).
const (
	CodeInt               DataTypeCode = 0
	CodeUInt              DataTypeCode = 1
	CodeFloat             DataTypeCode = 2
	CodeOpaqueHandle      DataTypeCode = 3
	CodeBfloat            DataTypeCode = 4
	CodeComplex           DataTypeCode = 5
	CodeBool              DataTypeCode = 6
	CodeFloat8E3M4        DataTypeCode = 7
	CodeFloat8E4M3        DataTypeCode = 8
	CodeFloat8E4M3B11FNUZ DataTypeCode = 9
	CodeFloat8E4M3FN      DataTypeCode = 10
	CodeFloat8E4M3FNUZ    DataTypeCode = 11
	CodeFloat8E5M2        DataTypeCode = 12
	CodeFloat8E5M2FNUZ    DataTypeCode = 13
	CodeFloat8E8M0FNU     DataTypeCode = 14
	CodeFloat6E2M3FN      DataTypeCode = 15
	CodeFloat6E3M2FN      DataTypeCode = 16
	CodeFloat4E2M1FN      DataTypeCode = 17
	CodeBcomplex          DataTypeCode = 18 // two bfloat16, real then imaginary: 32 bits
)

// codeInfo describes each known code: its name in type strings and, for the
// fixed-width formats, the only bit width the spec allows (0: see bitsOK).
var codeInfo = [...]struct {
	name      string
	fixedBits uint8
}{
	CodeInt:               {"int", 0},
	CodeUInt:              {"uint", 0},
	CodeFloat:             {"float", 0},
	CodeOpaqueHandle:      {"handle", 0},
	CodeBfloat:            {"bfloat16", 16},
	CodeComplex:           {"complex", 0},
	CodeBool:              {"bool", 8},
	CodeFloat8E3M4:        {"float8_e3m4", 8},
	CodeFloat8E4M3:        {"float8_e4m3", 8},
	CodeFloat8E4M3B11FNUZ: {"float8_e4m3b11fnuz", 8},
	CodeFloat8E4M3FN:      {"float8_e4m3fn", 8},
	CodeFloat8E4M3FNUZ:    {"float8_e4m3fnuz", 8},
	CodeFloat8E5M2:        {"float8_e5m2", 8},
	CodeFloat8E5M2FNUZ:    {"float8_e5m2fnuz", 8},
	CodeFloat8E8M0FNU:     {"float8_e8m0fnu", 8},
	CodeFloat6E2M3FN:      {"float6_e2m3fn", 6},
	CodeFloat6E3M2FN:      {"float6_e3m2fn", 6},
	CodeFloat4E2M1FN:      {"float4_e2m1fn", 4},
	CodeBcomplex:          {"bcomplex32", 32},
}

// IsKnown reports whether c is one of the codes above (0 to 18).
func (c DataTypeCode) IsKnown() bool { return int(c) < len(codeInfo) }

// String returns the code's name ("float", "float8_e4m3fn"), or "code(N)".
func (c DataTypeCode) String() string {
	if c.IsKnown() {
		return codeInfo[c].name
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// DataType mirrors DLDataType: the element type of a tensor. Lanes is 1 for
// scalar elements and more for vector types.
type DataType struct {
	_ structs.HostLayout

	Code  DataTypeCode
	Bits  uint8
	Lanes uint16
}

// Named data types, one for every known code at its usual width.
var (
	Bool           = DataType{Code: CodeBool, Bits: 8, Lanes: 1}
	Int8           = DataType{Code: CodeInt, Bits: 8, Lanes: 1}
	Int16          = DataType{Code: CodeInt, Bits: 16, Lanes: 1}
	Int32          = DataType{Code: CodeInt, Bits: 32, Lanes: 1}
	Int64          = DataType{Code: CodeInt, Bits: 64, Lanes: 1}
	Uint8          = DataType{Code: CodeUInt, Bits: 8, Lanes: 1}
	Uint16         = DataType{Code: CodeUInt, Bits: 16, Lanes: 1}
	Uint32         = DataType{Code: CodeUInt, Bits: 32, Lanes: 1}
	Uint64         = DataType{Code: CodeUInt, Bits: 64, Lanes: 1}
	Float16        = DataType{Code: CodeFloat, Bits: 16, Lanes: 1}
	Float32        = DataType{Code: CodeFloat, Bits: 32, Lanes: 1}
	Float64        = DataType{Code: CodeFloat, Bits: 64, Lanes: 1}
	BFloat16       = DataType{Code: CodeBfloat, Bits: 16, Lanes: 1}
	Complex64      = DataType{Code: CodeComplex, Bits: 64, Lanes: 1}
	Complex128     = DataType{Code: CodeComplex, Bits: 128, Lanes: 1}
	OpaqueHandle64 = DataType{Code: CodeOpaqueHandle, Bits: 64, Lanes: 1}

	Float8E3M4        = DataType{Code: CodeFloat8E3M4, Bits: 8, Lanes: 1}
	Float8E4M3        = DataType{Code: CodeFloat8E4M3, Bits: 8, Lanes: 1}
	Float8E4M3B11FNUZ = DataType{Code: CodeFloat8E4M3B11FNUZ, Bits: 8, Lanes: 1}
	Float8E4M3FN      = DataType{Code: CodeFloat8E4M3FN, Bits: 8, Lanes: 1}
	Float8E4M3FNUZ    = DataType{Code: CodeFloat8E4M3FNUZ, Bits: 8, Lanes: 1}
	Float8E5M2        = DataType{Code: CodeFloat8E5M2, Bits: 8, Lanes: 1}
	Float8E5M2FNUZ    = DataType{Code: CodeFloat8E5M2FNUZ, Bits: 8, Lanes: 1}
	Float8E8M0FNU     = DataType{Code: CodeFloat8E8M0FNU, Bits: 8, Lanes: 1}
	Float6E2M3FN      = DataType{Code: CodeFloat6E2M3FN, Bits: 6, Lanes: 1}
	Float6E3M2FN      = DataType{Code: CodeFloat6E3M2FN, Bits: 6, Lanes: 1}
	Float4E2M1FN      = DataType{Code: CodeFloat4E2M1FN, Bits: 4, Lanes: 1}
	Bcomplex32        = DataType{Code: CodeBcomplex, Bits: 32, Lanes: 1}
)

// String returns the type's name: "float32", "bfloat16", "float8_e4m3fn",
// "bool", with an "xN" suffix for N lanes ("int8x4"). A type whose bit width
// is not the one its code fixes, or whose code is unknown, prints as
// "dtype(code=C,bits=B)" (plus the lanes suffix). ParseDataType reads back
// every string String returns.
func (d DataType) String() string {
	var s string
	switch {
	case !d.Code.IsKnown() || (codeInfo[d.Code].fixedBits != 0 && d.Bits != codeInfo[d.Code].fixedBits):
		s = "dtype(code=" + strconv.Itoa(int(d.Code)) + ",bits=" + strconv.Itoa(int(d.Bits)) + ")"
	case codeInfo[d.Code].fixedBits != 0:
		s = codeInfo[d.Code].name
	default:
		s = codeInfo[d.Code].name + strconv.Itoa(int(d.Bits))
	}
	if d.Lanes != 1 {
		s += "x" + strconv.Itoa(int(d.Lanes))
	}
	return s
}

// ParseDataType parses the names String returns, such as "float32",
// "bfloat16", "float8_e4m3fn", "complex128", "bool", "int8x4" or
// "dtype(code=42,bits=8)". It checks the syntax only; use Validate to check
// the type against the spec.
func ParseDataType(s string) (DataType, error) {
	if d, ok := parseScalarType(s); ok {
		return d, nil
	}
	// "int8x4": a scalar type and a lanes suffix.
	if i := strings.LastIndexByte(s, 'x'); i > 0 && isDigits(s[i+1:]) {
		if d, ok := parseScalarType(s[:i]); ok {
			n, err := strconv.ParseUint(s[i+1:], 10, 16)
			if err != nil {
				return DataType{}, fieldErr(ErrDataType, "dtype", strconv.Quote(s), "lanes out of range")
			}
			d.Lanes = uint16(n)
			return d, nil
		}
	}
	return DataType{}, fieldErr(ErrDataType, "dtype", strconv.Quote(s), "unknown type name")
}

// parseScalarType parses a name without a lanes suffix.
func parseScalarType(s string) (DataType, bool) {
	if rest, ok := strings.CutPrefix(s, "dtype(code="); ok && strings.HasSuffix(rest, ")") {
		code, bits, ok := strings.Cut(strings.TrimSuffix(rest, ")"), ",bits=")
		c, err1 := strconv.ParseUint(code, 10, 8)
		b, err2 := strconv.ParseUint(bits, 10, 8)
		if !ok || err1 != nil || err2 != nil {
			return DataType{}, false
		}
		return DataType{Code: DataTypeCode(c), Bits: uint8(b), Lanes: 1}, true
	}
	// Fixed-width names first: "float8_e4m3fn" must not parse as "float" 8.
	for c, info := range codeInfo {
		if info.fixedBits != 0 && s == info.name {
			return DataType{Code: DataTypeCode(c), Bits: info.fixedBits, Lanes: 1}, true
		}
	}
	for c, info := range codeInfo {
		if info.fixedBits != 0 {
			continue
		}
		if digits, ok := strings.CutPrefix(s, info.name); ok && isDigits(digits) {
			b, err := strconv.ParseUint(digits, 10, 8)
			if err != nil {
				return DataType{}, false
			}
			return DataType{Code: DataTypeCode(c), Bits: uint8(b), Lanes: 1}, true
		}
	}
	return DataType{}, false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Validate checks d against the DLPack 1.3 rules: a known code; lanes >= 1;
// bool 8 bits; bfloat 16; float 16, 32 or 64; complex 32, 64 or 128;
// bcomplex 32; fp8 codes 8, fp6 6 and fp4 4 bits; int and uint 1, 2, 4, 8, 16, 32 or 64;
// opaque handles any non-zero width.
func (d DataType) Validate() error {
	if !d.Code.IsKnown() {
		return fieldErr(ErrDataType, "dtype.code", int(d.Code), "unknown type code")
	}
	if d.Lanes == 0 {
		return fieldErr(ErrDataType, "dtype.lanes", 0, "lanes must be at least 1")
	}
	if !d.bitsOK() {
		return fieldErr(ErrDataType, "dtype.bits", int(d.Bits), "not a valid width for "+d.Code.String())
	}
	return nil
}

func (d DataType) bitsOK() bool {
	if f := codeInfo[d.Code].fixedBits; f != 0 {
		return d.Bits == f
	}
	switch d.Code {
	case CodeInt, CodeUInt:
		switch d.Bits {
		case 1, 2, 4, 8, 16, 32, 64:
			return true
		}
	case CodeFloat:
		return d.Bits == 16 || d.Bits == 32 || d.Bits == 64
	case CodeComplex:
		return d.Bits == 32 || d.Bits == 64 || d.Bits == 128
	case CodeOpaqueHandle:
		return d.Bits != 0
	}
	return false
}

// IsSubbyte reports whether one element (all lanes) is smaller than a byte
// or not a whole number of bytes.
func (d DataType) IsSubbyte() bool { return (int(d.Bits)*int(d.Lanes))%8 != 0 }

// ItemSize returns the bytes one element occupies, for types whose elements
// are a whole number of bytes; 0 for sub-byte types.
func (d DataType) ItemSize() int {
	if d.IsSubbyte() {
		return 0
	}
	return int(d.Bits) * int(d.Lanes) / 8
}

// StorageBytes returns the bytes n elements occupy in a compact buffer. For
// sub-byte types the elements are packed (little bit-endian) unless padded
// is true (FlagSubbyteTypePadded), in which case each lane takes one byte.
// It reports false on overflow or negative n.
func (d DataType) StorageBytes(n int64, padded bool) (int64, bool) {
	if n < 0 {
		return 0, false
	}
	if d.IsSubbyte() && padded {
		return mulCheck(n, int64(d.Lanes))
	}
	bitsPer := int64(d.Bits) * int64(d.Lanes)
	total, ok := mulCheck(n, bitsPer)
	if !ok {
		return 0, false
	}
	return total/8 + boolInt(total%8 != 0), true
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Element is the set of Go types that have a DLPack data type and may be
// viewed or exported directly. The reduced-precision floats of package
// minifloat (float16, bfloat16, float8_e4m3fn, float8_e5m2) are elements
// too. DLPack bool elements are bytes holding 0 or 1, which is what Go's
// bool is; a producer that stores other byte values in a bool tensor should
// be viewed as uint8 instead.
type Element interface {
	int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 |
		float32 | float64 | complex64 | complex128 | bool |
		minifloat.Float16 | minifloat.BFloat16 | minifloat.E4M3FN | minifloat.E5M2
}

// DataTypeOf returns the DLPack data type of the Go element type T.
func DataTypeOf[T Element]() DataType {
	// Small enough to be inlined: float32, by far the most exchanged
	// type, costs one comparison of type words; the rest go to the switch.
	if _, ok := any((*T)(nil)).(*float32); ok {
		return Float32
	}
	return dataTypeOf[T]()
}

func dataTypeOf[T Element]() DataType {
	// A nil *T converts to an interface without a call (a T value would
	// go through the runtime's conversion); the most exchanged types come
	// first, since the switch compares in order.
	switch any((*T)(nil)).(type) {
	case *float32:
		return Float32
	case *float64:
		return Float64
	case *uint8:
		return Uint8
	case *int64:
		return Int64
	case *int32:
		return Int32
	case *minifloat.Float16:
		return Float16
	case *minifloat.BFloat16:
		return BFloat16
	case *int8:
		return Int8
	case *int16:
		return Int16
	case *uint16:
		return Uint16
	case *uint32:
		return Uint32
	case *uint64:
		return Uint64
	case *complex64:
		return Complex64
	case *complex128:
		return Complex128
	case *bool:
		return Bool
	case *minifloat.E4M3FN:
		return Float8E4M3FN
	case *minifloat.E5M2:
		return Float8E5M2
	}
	panic(fmt.Sprintf("dlpack: DataTypeOf: unreachable type %T", (*T)(nil)))
}

// Alignment returns the byte alignment a consumer may assume for the first
// element of a tensor of type d (and so, elements being whole multiples of
// it apart, for every element): the size of one scalar (one lane; half a
// complex number, as C's _Alignof(double _Complex) is _Alignof(double)),
// reduced to the largest power of two that divides it, and capped at 8,
// the largest alignment of any C or Go scalar type DLPack carries. Sub-byte
// types need 1.
func (d DataType) Alignment() int {
	bits := int(d.Bits)
	if d.Code == CodeComplex {
		bits /= 2
	}
	if bits%8 != 0 || bits == 0 {
		return 1
	}
	s := bits / 8
	return min(s&-s, 8)
}
