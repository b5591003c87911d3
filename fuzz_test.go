package dlpack

import (
	"encoding/binary"
	"errors"
	"math/big"
	"testing"
	"unsafe"
)

// sentinels every validation error must wrap one of.
var validationSentinels = []error{ErrNDim, ErrShape, ErrStrides, ErrDataType, ErrDevice, ErrNullData, ErrOverflow, ErrFlags}

func int64sFrom(b []byte, n int, fallback int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		if len(b) >= 8*(i+1) {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else if len(b) > 0 {
			out[i] = int64(int8(b[i%len(b)]))
		} else {
			out[i] = fallback
		}
	}
	return out
}

// FuzzCheckTensor feeds arbitrary header fields to the validator. The
// shape and strides arrays live in memory the harness sized from ndim, so
// the fuzzer explores values, not wild pointers. Invariants: no panic;
// rejections wrap a validation sentinel and name a field; an accepted
// tensor's extent equals an independent big-integer computation, lies in
// the address space, and contains every element's address.
func FuzzCheckTensor(f *testing.F) {
	le := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(uint32(3), uint64(0), false, int32(1), int32(0), int32(2), uint8(2), uint8(32), uint16(1), uint64(0), le(2, 3), le(3, 1), false, false, uint8(1))
	f.Add(uint32(1), uint64(1), true, int32(2), int32(1), int32(3), uint8(5), uint8(64), uint16(1), uint64(16), le(3, 2, 2), le(-4, 0, 1), false, true, uint8(1))
	f.Add(uint32(3), uint64(4), false, int32(1), int32(0), int32(1), uint8(17), uint8(4), uint16(2), uint64(1), le(5), le(1), false, false, uint8(2))
	f.Add(uint32(3), uint64(0), false, int32(1), int32(0), int32(2), uint8(2), uint8(64), uint16(1), uint64(0), le(1<<40, 1<<40), le(1, 1), false, false, uint8(0))
	f.Add(uint32(2), uint64(0), false, int32(19), int32(-1), int32(65), uint8(99), uint8(0), uint16(0), uint64(1<<63), []byte{}, []byte{}, true, true, uint8(3))
	f.Fuzz(func(t *testing.T, minor uint32, flags uint64, legacy bool, devType, devID, ndim int32,
		code, bits uint8, lanes uint16, byteOffset uint64, shapeB, strideB []byte, nullShape, nullStrides bool, dataMode uint8) {
		buf := make([]byte, 4096)
		tn := Tensor{Device: Device{Type: DeviceType(devType), ID: devID}, NDim: ndim,
			DType: DataType{Code: DataTypeCode(code), Bits: bits, Lanes: lanes}, ByteOffset: byteOffset}
		switch dataMode % 4 {
		case 1:
			tn.Data = uintptr(unsafe.Pointer(&buf[0]))
		case 2:
			tn.Data = ^uintptr(0) - 4095
		case 3:
			tn.Data = 8
		}
		var shape, strides []int64
		if ndim >= 0 && ndim <= MaxNDim+1 {
			shape = int64sFrom(shapeB, int(ndim), 1)
			strides = int64sFrom(strideB, int(ndim), 1)
			if ndim > 0 && !nullShape {
				tn.Shape = &shape[0]
			}
			if ndim > 0 && !nullStrides {
				tn.Strides = &strides[0]
			}
		} else if ndim > 0 && !nullShape {
			// The validator must reject this ndim before reading the shape;
			// a one-element array makes any read past it visible to -asan/race.
			one := []int64{1}
			tn.Shape = &one[0]
		}
		var c checked
		err := checkTensor(&c, &tn, Version{Major: 1, Minor: minor}, Flags(flags), legacy, nil)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			for _, s := range validationSentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no validation sentinel: %v", err)
		}
		// Accepted: recompute everything with big integers.
		n := int(ndim)
		if c.ndim != n || len(c.shape) != n || len(c.strides) != n {
			t.Fatalf("layout has ndim %d, shape %v, strides %v for ndim %d", c.ndim, c.shape, c.strides, n)
		}
		numel := big.NewInt(1)
		for _, d := range c.shape {
			if d < 0 {
				t.Fatalf("accepted negative dimension %v", c.shape)
			}
			numel.Mul(numel, big.NewInt(d))
		}
		if !numel.IsInt64() || numel.Int64() != c.numel {
			t.Fatalf("numel %d, want %v", c.numel, numel)
		}
		if c.numel == 0 {
			return
		}
		if tn.Data == 0 {
			t.Fatal("accepted NULL data with elements")
		}
		lo, hi := new(big.Int), new(big.Int)
		for i := 0; i < n; i++ {
			if c.shape[i] <= 1 {
				continue
			}
			span := new(big.Int).Mul(big.NewInt(c.strides[i]), big.NewInt(c.shape[i]-1))
			if span.Sign() > 0 {
				hi.Add(hi, span)
			} else {
				lo.Add(lo, span)
			}
		}
		if lo.Int64() != c.minOff || hi.Int64() != c.maxOff || !lo.IsInt64() || !hi.IsInt64() {
			t.Fatalf("extent [%d, %d], want [%v, %v]", c.minOff, c.maxOff, lo, hi)
		}
		elemBits := int64(bits) * int64(lanes)
		if c.dtype.IsSubbyte() && Flags(flags)&FlagSubbyteTypePadded != 0 {
			elemBits = 8 * int64(lanes)
		}
		first := new(big.Int).Add(new(big.Int).SetUint64(uint64(tn.Data)), new(big.Int).SetUint64(byteOffset))
		loByte := new(big.Int).Add(first, new(big.Int).Div(new(big.Int).Mul(lo, big.NewInt(elemBits)), big.NewInt(8)))
		hiBits := new(big.Int).Mul(new(big.Int).Add(hi, big.NewInt(1)), big.NewInt(elemBits))
		hiByte := new(big.Int).Add(first, new(big.Int).Div(new(big.Int).Add(hiBits, big.NewInt(7)), big.NewInt(8)))
		limit := new(big.Int).Lsh(big.NewInt(1), 64)
		if loByte.Sign() < 0 || hiByte.Cmp(limit) > 0 {
			t.Fatalf("accepted a tensor outside the address space: [%v, %v)", loByte, hiByte)
		}
		if first.Uint64() != uint64(c.data) {
			t.Fatalf("first element at %#x, want %v", c.data, first)
		}
	})
}

// fuzzRoundTrip checks that parse never panics, that its errors wrap
// sentinel, and that whatever it accepts prints back (with str) to a string
// that parses to the same value.
func fuzzRoundTrip[T comparable](f *testing.F, seeds []string, parse func(string) (T, error), str func(T) string, sentinel error) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parse(s)
		if err != nil {
			if !errors.Is(err, sentinel) {
				t.Fatalf("error %v does not wrap %v", err, sentinel)
			}
			return
		}
		v2, err := parse(str(v))
		if err != nil || v2 != v {
			t.Fatalf("%q -> %#v -> %q -> %#v, %v", s, v, str(v), v2, err)
		}
	})
}

func FuzzParseDataType(f *testing.F) {
	fuzzRoundTrip(f, []string{"float32", "bfloat16", "float8_e4m3fn", "int8x4", "complex128", "bool", "dtype(code=99,bits=8)x3", "x", "floatx"},
		ParseDataType, DataType.String, ErrDataType)
}

func FuzzParseDevice(f *testing.F) {
	fuzzRoundTrip(f, []string{"cpu", "cuda:1", "rocm_host", "device(42):3", "cuda:-1", ":"},
		ParseDevice, Device.String, ErrDevice)
}
