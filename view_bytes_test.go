//go:build cgo

package dlpack_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// Float32 elements one byte off their alignment: no typed view, but the
// bytes read back the values.
func TestReadOnlyBytesMisaligned(t *testing.T) {
	s := cpuF32([]int64{2, 2}, f32s(1, 2, 3, 4))
	s.DataShift = 1
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dlpack.ReadOnlySlice[float32](f); !errors.Is(err, dlpack.ErrAlignment) {
		t.Fatalf("ReadOnlySlice of misaligned data: %v, want ErrAlignment", err)
	}
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 16 || first != 0 || uintptr(unsafe.Pointer(&b[0])) != f.DataAddr() {
		t.Fatalf("got %d bytes at %p, first %d; want the 16 bytes at %#x, first 0", len(b), &b[0], first, f.DataAddr())
	}
	var got []float32
	for i := 0; i < 4; i++ {
		got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("decoded %v, want [1 2 3 4]", got)
	}
	f.Close()
	if _, _, err := dlpack.ReadOnlyBytes(f); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if ct.Deletes() != 1 {
		t.Fatalf("deleter ran %d times, want 1", ct.Deletes())
	}
}

// For many layouts (zero, negative and mixed strides, byte offsets, odd
// addresses), the slice spans exactly the bytes from the lowest element to
// the end of the highest, found here by visiting every index, and every
// element decodes from it to what the typed view reads.
func TestReadOnlyBytesExtent(t *testing.T) {
	cases := []struct {
		shape, strides []int64
		offset         uint64 // bytes
		shift          int
	}{
		{[]int64{}, []int64{}, 0, 0},
		{[]int64{5}, []int64{1}, 0, 0},
		{[]int64{5}, []int64{-1}, 16, 0},
		{[]int64{3, 4}, []int64{4, 1}, 0, 3},
		{[]int64{3, 4}, []int64{1, 3}, 0, 0},
		{[]int64{3, 4}, []int64{-4, 1}, 32, 0},
		{[]int64{2, 3}, []int64{0, 2}, 4, 0},
		{[]int64{3, 1, 2}, []int64{-2, 99, -1}, 20, 2},
		{[]int64{2, 2, 2}, []int64{1, -4, 2}, 16, 1},
	}
	for _, c := range cases {
		name := fmt.Sprint(c.shape, c.strides, c.offset, c.shift)
		data := make([]float32, 64)
		for i := range data {
			data[i] = float32(i)
		}
		s := cpuF32(c.shape, f32s(data...))
		s.Strides, s.ByteOffset, s.DataShift = c.strides, c.offset, c.shift
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Element offsets of every index, by brute force.
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		var offs []int64
		var walk func(d int, off int64)
		walk = func(d int, off int64) {
			if d == len(c.shape) {
				offs = append(offs, off)
				lo, hi = min(lo, off), max(hi, off)
				return
			}
			for i := int64(0); i < c.shape[d]; i++ {
				walk(d+1, off+i*c.strides[d])
			}
		}
		walk(0, 0)
		b, first, err := dlpack.ReadOnlyBytes(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if int64(len(b)) != 4*(hi-lo+1) || int64(first) != -4*lo {
			t.Fatalf("%s: %d bytes, first %d; want %d, %d", name, len(b), first, 4*(hi-lo+1), -4*lo)
		}
		if got, want := uintptr(unsafe.Pointer(&b[first])), f.DataAddr(); got != want {
			t.Fatalf("%s: b[first] at %#x, first element at %#x", name, got, want)
		}
		for k, off := range offs {
			x := math.Float32frombits(binary.LittleEndian.Uint32(b[first+int(4*off):]))
			if want := float32(int64(c.offset/4) + off); x != want {
				t.Fatalf("%s: element %d decodes to %v, want %v", name, k, x, want)
			}
		}
		if c.shift == 0 { // aligned: the typed view reads the same elements
			v, err := dlpack.ViewOf[float32](f)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for k, x := range v.All() {
				if want := math.Float32frombits(binary.LittleEndian.Uint32(b[first+int(4*offs[k]):])); x != want {
					t.Fatalf("%s: view element %d is %v, bytes say %v", name, k, x, want)
				}
			}
		}
		f.Close()
	}
}

// A Go export imported back: the bytes are the Go slice's own memory.
func TestReadOnlyBytesOfGoExport(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	m, err := dlpack.Export(xs, []int64{3}, dlpack.WithStrides(-2), dlpack.WithOffset(6)) // 6, 4, 2
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.Import(unsafe.Pointer(m))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5*8 || first != 4*8 || &b[0] != (*byte)(unsafe.Pointer(&xs[2])) {
		t.Fatalf("got %d bytes from %p, first %d; want 40 bytes from &xs[2] (%p), first 32", len(b), &b[0], first, &xs[2])
	}
	if x := math.Float64frombits(binary.LittleEndian.Uint64(b[first:])); x != 6 {
		t.Fatalf("first element %v, want 6", x)
	}
}

func TestReadOnlyBytesEdges(t *testing.T) {
	// Packed 4-bit elements: 3 of them take 2 bytes; padded, 3 bytes.
	for _, c := range []struct {
		flags uint64
		n     int
	}{{0, 2}, {uint64(dlpack.FlagSubbyteTypePadded), 3}} {
		ct := cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 1, Code: 0, Bits: 4, Lanes: 1, Flags: c.flags,
			Shape: []int64{3}, Strides: []int64{1}, Data: []byte{0x21, 0x03, 0x00}})
		f, err := dlpack.Import(ct.Ptr)
		if err != nil {
			t.Fatal(err)
		}
		b, first, err := dlpack.ReadOnlyBytes(f)
		if err != nil || len(b) != c.n || first != 0 {
			t.Fatalf("int4 x 3 (flags %d): %d bytes, first %d, %v; want %d bytes, first 0", c.flags, len(b), first, err, c.n)
		}
		f.Close()
	}
	// Empty: nil.
	ct := cshim.Make(cpuF32([]int64{0, 3}, nil))
	f, err := dlpack.Import(ct.Ptr)
	if err != nil {
		t.Fatal(err)
	}
	if b, first, err := dlpack.ReadOnlyBytes(f); b != nil || first != 0 || err != nil {
		t.Fatalf("empty tensor: %v, %d, %v; want nil, 0, nil", b, first, err)
	}
	f.Close()
	// Device memory: ErrDevice, read nothing.
	s := cpuF32([]int64{2}, nil)
	s.DeviceType, s.DataAddr = int32(dlpack.CUDA), 0x7f0000001000
	ct = cshim.Make(s)
	if f, err = dlpack.Import(ct.Ptr); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dlpack.ReadOnlyBytes(f); !errors.Is(err, dlpack.ErrDevice) {
		t.Fatalf("CUDA tensor: %v, want ErrDevice", err)
	}
	f.Close()
}

// ExampleReadOnlyBytes reads a tensor as bytes: here a reversed view of a
// Go slice, imported back. For misaligned elements, where typed views
// fail with ErrAlignment, the decoding is the same.
func ExampleReadOnlyBytes() {
	xs := []uint16{10, 20, 30, 40}
	m, _ := dlpack.Export(xs, []int64{3}, dlpack.WithStrides(-1), dlpack.WithOffset(3)) // 40, 30, 20
	f, _ := dlpack.Import(unsafe.Pointer(m))
	defer f.Close()
	b, first, _ := dlpack.ReadOnlyBytes(f)
	fmt.Println(len(b), "bytes; the first element starts at byte", first)
	for i := int64(0); i < f.Len(); i++ {
		at := first + int(i*f.Stride(0))*f.DataType().ItemSize()
		fmt.Print(binary.NativeEndian.Uint16(b[at:]), " ")
	}
	fmt.Println()
	// Output:
	// 6 bytes; the first element starts at byte 4
	// 40 30 20
}
