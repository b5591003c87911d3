//go:build cgo

package dlpack_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

var importSentinels = []error{dlpack.ErrVersion, dlpack.ErrNDim, dlpack.ErrShape, dlpack.ErrStrides,
	dlpack.ErrDataType, dlpack.ErrDevice, dlpack.ErrNullData, dlpack.ErrOverflow, dlpack.ErrFlags}

// FuzzImport builds managed tensors in C from fuzzed header fields (legacy
// or versioned; any version, flags, device, ndim, dtype, shape, strides,
// byte offset) over a 1 KiB buffer the harness owns (or NULL, or an
// address at the top of the address space), and imports them owned or
// scoped. Invariants: no panic; a rejection wraps a validation sentinel
// and names a field; the deleter runs exactly once either way; an accepted
// float64 CPU tensor whose extent lies inside the buffer can be read
// element by element.
func FuzzImport(f *testing.F) {
	le := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(false, uint32(1), uint32(3), uint64(0), int32(1), int32(0), int8(2), uint8(2), uint8(64), uint16(1), le(2, 3), le(3, 1), uint64(0), uint8(1), false)
	f.Add(true, uint32(0), uint32(0), uint64(0), int32(1), int32(0), int8(1), uint8(2), uint8(64), uint16(1), le(4), []byte{}, uint64(8), uint8(1), true)
	f.Add(false, uint32(2), uint32(0), uint64(0), int32(1), int32(0), int8(1), uint8(2), uint8(64), uint16(1), le(4), le(1), uint64(0), uint8(1), false)
	f.Add(false, uint32(1), uint32(3), uint64(9), int32(19), int32(-1), int8(-3), uint8(99), uint8(0), uint16(0), []byte{}, []byte{}, uint64(1<<63), uint8(0), false)
	f.Add(false, uint32(1), uint32(3), uint64(0), int32(1), int32(0), int8(2), uint8(2), uint8(64), uint16(1), le(3, 4), le(-4, 1), uint64(64), uint8(1), true)
	f.Fuzz(func(t *testing.T, legacy bool, major, minor uint32, flags uint64, devType, devID int32, ndim int8,
		code, bits uint8, lanes uint16, shapeB, strideB []byte, byteOffset uint64, dataMode uint8, scoped bool) {
		const bufLen = 1024
		s := cshim.Spec{Legacy: legacy, Major: major, Minor: minor, Flags: flags, DeviceType: devType, DeviceID: devID,
			NDim: int32(ndim), Code: code, Bits: bits, Lanes: lanes, ByteOffset: byteOffset}
		n := max(int(ndim), 0)
		if n > 70 {
			n = 70
		}
		s.Shape = make([]int64, n)
		for i := range s.Shape {
			if len(shapeB) >= 8*(i+1) {
				s.Shape[i] = int64(binary.LittleEndian.Uint64(shapeB[8*i:]))
			} else {
				s.Shape[i] = 1
			}
		}
		if len(strideB) > 0 {
			s.Strides = make([]int64, n)
			for i := range s.Strides {
				if len(strideB) >= 8*(i+1) {
					s.Strides[i] = int64(binary.LittleEndian.Uint64(strideB[8*i:]))
				}
			}
		}
		switch dataMode % 3 {
		case 0: // NULL
		case 1:
			s.Data = make([]byte, bufLen)
			for i := range s.Data {
				s.Data[i] = byte(i)
			}
		case 2:
			s.DataAddr = ^uintptr(0) - 255
		}
		ct := cshim.Make(s)
		read := func(fr dlpack.Foreign) {
			// Broadcast (zero) strides make huge valid tensors over a few
			// bytes: walk only those of bounded length.
			if dataMode%3 != 1 || fr.DataType() != dlpack.Float64 || fr.Device() != dlpack.CPUDevice || fr.Len() > 1<<16 {
				return
			}
			// Read only when the harness can see the extent fits its buffer.
			lo, hi := int64(fr.ByteOffset()), int64(fr.ByteOffset())+8
			for i := 0; i < fr.NDim(); i++ {
				if fr.Dim(i) == 0 {
					return
				}
				span := fr.Stride(i) * (fr.Dim(i) - 1) * 8
				if span/8/max(fr.Dim(i)-1, 1) != fr.Stride(i) || span > bufLen || span < -bufLen {
					return
				}
				if span > 0 {
					hi += span
				} else {
					lo += span
				}
			}
			if lo < 0 || hi > bufLen || fr.ByteOffset() > bufLen {
				return
			}
			v, err := dlpack.ViewOf[float64](fr)
			if err != nil {
				if !errors.Is(err, dlpack.ErrAlignment) {
					t.Fatalf("view of an accepted tensor: %v", err)
				}
				return
			}
			count := 0
			for range v.All() {
				count++
			}
			if int64(count) != fr.Len() {
				t.Fatalf("read %d of %d elements", count, fr.Len())
			}
		}
		var err error
		switch {
		case scoped && legacy:
			err = dlpack.BorrowLegacy(ct.Ptr, func(fr dlpack.Foreign) error { read(fr); return nil })
		case scoped:
			err = dlpack.Borrow(ct.Ptr, func(fr dlpack.Foreign) error { read(fr); return nil })
		default:
			var fr dlpack.Foreign
			if legacy {
				fr, err = dlpack.ImportLegacy(ct.Ptr)
			} else {
				fr, err = dlpack.Import(ct.Ptr)
			}
			if err == nil {
				read(fr)
				fr.Close()
			}
		}
		if err != nil {
			var fe *dlpack.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			ok := false
			for _, s := range importSentinels {
				ok = ok || errors.Is(err, s)
			}
			if !ok {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
		}
		if d := ct.Deletes(); d != 1 {
			t.Fatalf("deleter ran %d times (err %v)", d, err)
		}
	})
}
