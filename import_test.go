//go:build cgo

package dlpack_test

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// malformed lists one tensor per validation rule. Each must be rejected
// with its sentinel and field, and released exactly once.
var malformed = []struct {
	name  string
	spec  func() cshim.Spec
	opts  []dlpack.ImportOption
	err   error
	field string
}{
	{"major version 2", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Major = 2; return s }, nil, dlpack.ErrVersion, "version.major"},
	{"major version 0", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Major = 0; return s }, nil, dlpack.ErrVersion, "version.major"},
	{"major version 2 with garbage tensor", func() cshim.Spec {
		return cshim.Spec{Major: 2, NDim: -5, ShapeNull: true, Code: 200, DeviceType: 999}
	}, nil, dlpack.ErrVersion, "version.major"},
	{"major version 0xffffffff", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Major = 0xffffffff; return s }, nil, dlpack.ErrVersion, "version.major"},
	{"bool of 16 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 6, 16; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"int of 12 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 0, 12; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"opaque handle of 0 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 3, 0; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"flag bit 63", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Flags = 1 << 63; return s }, nil, dlpack.ErrFlags, "flags"},
	{"legacy NULL data with elements", func() cshim.Spec {
		s := cpuF32([]int64{3}, nil)
		s.Legacy = true
		return s
	}, nil, dlpack.ErrNullData, "dl_tensor.data"},
	{"negative ndim", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.NDim = -1; return s }, nil, dlpack.ErrNDim, "dl_tensor.ndim"},
	{"ndim above 64", func() cshim.Spec { s := cpuF32(make([]int64, 65), nil); return s }, nil, dlpack.ErrNDim, "dl_tensor.ndim"},
	{"unknown type code", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code = 19; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.code"},
	{"zero lanes", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Lanes = 0; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.lanes"},
	{"bool of 1 bit", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 6, 1; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"float8 of 16 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 10, 16; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"float6 of 8 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 15, 8; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"float4 of 8 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 17, 8; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"complex of 16 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 5, 16; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"bfloat of 32 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Code, s.Bits = 4, 32; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"float of 8 bits", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Bits = 8; return s }, nil, dlpack.ErrDataType, "dl_tensor.dtype.bits"},
	{"device type 0", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.DeviceType = 0; return s }, nil, dlpack.ErrDevice, "dl_tensor.device.device_type"},
	{"unassigned device type 5", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.DeviceType = 5; return s }, nil, dlpack.ErrDevice, "dl_tensor.device.device_type"},
	{"device type from the future", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.DeviceType = 22; return s }, nil, dlpack.ErrDevice, "dl_tensor.device.device_type"},
	{"negative device id", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.DeviceID = -1; return s }, nil, dlpack.ErrDevice, "dl_tensor.device.device_id"},
	{"unknown flag bit", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Flags = 1 << 3; return s }, nil, dlpack.ErrFlags, "flags"},
	{"NULL shape", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.ShapeNull = true; return s }, nil, dlpack.ErrShape, "dl_tensor.shape"},
	{"negative dimension", func() cshim.Spec { return cpuF32([]int64{2, -3}, f32s(1, 2)) }, nil, dlpack.ErrShape, "dl_tensor.shape[1]"},
	{"element count overflow", func() cshim.Spec {
		s := cpuF32([]int64{1 << 40, 1 << 40}, f32s(1))
		s.Strides = []int64{1, 1}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.shape"},
	{"NULL strides at 1.2", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Minor, s.Strides = 2, nil
		return s
	}, nil, dlpack.ErrStrides, "dl_tensor.strides"},
	{"NULL strides at 1.3", func() cshim.Spec { s := cpuF32([]int64{2}, f32s(1, 2)); s.Strides = nil; return s }, nil, dlpack.ErrStrides, "dl_tensor.strides"},
	{"NULL data with elements", func() cshim.Spec { return cpuF32([]int64{2}, nil) }, nil, dlpack.ErrNullData, "dl_tensor.data"},
	{"stride extent overflow", func() cshim.Spec {
		s := cpuF32([]int64{4}, f32s(1))
		s.Strides = []int64{1 << 62}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.strides[0]"},
	{"extent spanning more than int64", func() cshim.Spec {
		s := cpuF32([]int64{2, 2}, f32s(1))
		s.Strides = []int64{math.MaxInt64, math.MinInt64 + 1}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.strides"},
	{"byte extent overflow", func() cshim.Spec {
		s := cpuF32([]int64{3}, f32s(1))
		s.Bits = 64
		s.Strides = []int64{1 << 61}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.strides"},
	{"byte_offset above int64", func() cshim.Spec {
		s := cpuF32([]int64{1}, f32s(1))
		s.ByteOffset = 1 << 63
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.byte_offset"},
	{"data plus byte_offset wraps", func() cshim.Spec {
		s := cpuF32([]int64{1}, nil)
		s.DataAddr = ^uintptr(0) - 0xfff
		s.ByteOffset = 0x2000
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.byte_offset"},
	{"negative stride below address 0", func() cshim.Spec {
		s := cpuF32([]int64{3}, nil)
		s.DataAddr = 0x1000
		s.Strides = []int64{-1 << 20}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.strides"},
	{"extent past the address space", func() cshim.Spec {
		s := cpuF32([]int64{3}, nil)
		s.DataAddr = ^uintptr(0) - 0xfff
		s.Strides = []int64{1 << 20}
		return s
	}, nil, dlpack.ErrOverflow, "dl_tensor.strides"},
	{"legacy negative ndim", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Legacy, s.NDim = true, -2
		return s
	}, nil, dlpack.ErrNDim, "dl_tensor.ndim"},
	{"legacy NULL shape", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Legacy, s.ShapeNull = true, true
		return s
	}, nil, dlpack.ErrShape, "dl_tensor.shape"},
	{"legacy unknown dtype", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Legacy, s.Code = true, 77
		return s
	}, nil, dlpack.ErrDataType, "dl_tensor.dtype.code"},
	{"required data type", func() cshim.Spec { return cpuF32([]int64{2}, f32s(1, 2)) },
		[]dlpack.ImportOption{dlpack.RequireDataType(dlpack.Float64)}, dlpack.ErrRequirement, "dl_tensor.dtype"},
	{"required ndim", func() cshim.Spec { return cpuF32([]int64{2}, f32s(1, 2)) },
		[]dlpack.ImportOption{dlpack.RequireNDim(2)}, dlpack.ErrRequirement, "dl_tensor.ndim"},
	{"required device", func() cshim.Spec { return cpuF32([]int64{2}, f32s(1, 2)) },
		[]dlpack.ImportOption{dlpack.RequireDevice(dlpack.Device{Type: dlpack.CUDA})}, dlpack.ErrRequirement, "dl_tensor.device"},
	{"required writable, read-only flag", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Flags = 1
		return s
	}, []dlpack.ImportOption{dlpack.RequireWritable()}, dlpack.ErrRequirement, "flags"},
	{"required writable, legacy", func() cshim.Spec {
		s := cpuF32([]int64{2}, f32s(1, 2))
		s.Legacy = true
		return s
	}, []dlpack.ImportOption{dlpack.RequireWritable()}, dlpack.ErrRequirement, "flags"},
	{"required contiguous", func() cshim.Spec {
		s := cpuF32([]int64{2, 2}, f32s(1, 2, 3, 4))
		s.Strides = []int64{1, 2}
		return s
	}, []dlpack.ImportOption{dlpack.RequireContiguous()}, dlpack.ErrRequirement, "dl_tensor.strides"},
}

func TestImportRejectsMalformed(t *testing.T) {
	for _, c := range malformed {
		for _, scoped := range []bool{false, true} {
			name := c.name
			if scoped {
				name += "/borrow"
			}
			t.Run(name, func(t *testing.T) {
				spec := c.spec()
				ct := cshim.Make(spec)
				var err error
				called := false
				switch {
				case scoped && spec.Legacy:
					err = dlpack.BorrowLegacy(ct.Ptr, func(dlpack.Foreign) error { called = true; return nil }, c.opts...)
				case scoped:
					err = dlpack.Borrow(ct.Ptr, func(dlpack.Foreign) error { called = true; return nil }, c.opts...)
				case spec.Legacy:
					_, err = dlpack.ImportLegacy(ct.Ptr, c.opts...)
				default:
					_, err = dlpack.Import(ct.Ptr, c.opts...)
				}
				require.Error(t, err)
				assert.False(t, called, "fn must not run for a rejected tensor")
				assert.True(t, errors.Is(err, c.err), "want %v, got %v", c.err, err)
				var fe *dlpack.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, c.field, fe.Field)
				assert.Contains(t, err.Error(), c.field)
				assert.Equal(t, int64(1), ct.Deletes(), "a rejected tensor is released exactly once")
			})
		}
	}
}

func TestImportRejectsWithNullDeleter(t *testing.T) {
	s := cpuF32([]int64{2}, f32s(1, 2))
	s.Major, s.NullDeleter = 3, true
	ct := cshim.Make(s)
	_, err := dlpack.Import(ct.Ptr)
	require.ErrorIs(t, err, dlpack.ErrVersion)
	assert.Equal(t, int64(0), ct.Deletes(), "a NULL deleter is never called")
	cshim.Free(ct)
}

func TestImportNil(t *testing.T) {
	_, err := dlpack.Import(nil)
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	_, err = dlpack.ImportLegacy(nil)
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	require.ErrorIs(t, dlpack.Borrow(nil, func(dlpack.Foreign) error { return nil }), dlpack.ErrNilPointer)
}

func TestImportCompact(t *testing.T) {
	ct := cshim.Make(cpuF32([]int64{2, 3}, f32s(1, 2, 3, 4, 5, 6)))
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	assert.Equal(t, 2, f.NDim())
	assert.Equal(t, []int64{2, 3}, f.Shape())
	assert.Equal(t, []int64{3, 1}, f.Strides())
	assert.Equal(t, int64(3), f.Dim(1))
	assert.Equal(t, int64(1), f.Stride(1))
	assert.Equal(t, int64(6), f.Len())
	assert.Equal(t, int64(24), f.NBytes())
	assert.Equal(t, dlpack.Float32, f.DataType())
	assert.Equal(t, dlpack.CPUDevice, f.Device())
	assert.Equal(t, dlpack.Version{Major: 1, Minor: 3}, f.Version())
	assert.Equal(t, dlpack.Flags(0), f.Flags())
	assert.True(t, f.IsContiguous())
	assert.True(t, f.Writable())
	assert.False(t, f.Legacy())
	assert.False(t, f.IsCopied())
	assert.Equal(t, "float32[2 3] cpu strides [3 1]", f.String())

	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, xs)
	xs[0] = 10 // writes the producer's memory
	assert.Equal(t, 30.0, cshim.SumVersioned(ct.Ptr))

	_, err = dlpack.Slice[int32](f)
	assert.ErrorIs(t, err, dlpack.ErrTypeMismatch)

	require.NoError(t, f.Close())
	assert.Equal(t, int64(1), ct.Deletes())
	require.NoError(t, f.Close(), "Close is idempotent")
	assert.Equal(t, int64(1), ct.Deletes())
	assert.True(t, f.Closed())
	assert.ErrorIs(t, f.Err(), dlpack.ErrClosed)
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
	_, err = dlpack.ViewOf[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
	assert.Nil(t, f.Shape())
	assert.Equal(t, "dlpack.Foreign(closed)", f.String())
	var zero dlpack.Foreign
	assert.True(t, zero.Closed())
	assert.NoError(t, zero.Close())
}

func TestImportNullStridesBefore12(t *testing.T) {
	for _, minor := range []uint32{0, 1} {
		s := cpuF32([]int64{2, 3, 4}, make([]byte, 96))
		s.Minor, s.Strides = minor, nil
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		assert.Equal(t, []int64{12, 4, 1}, f.Strides(), "NULL strides mean row-major")
		assert.True(t, f.IsContiguous())
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes())
	}
}

func TestImportNewerMinor(t *testing.T) {
	s := cpuF32([]int64{2}, f32s(1, 2))
	s.Minor = 99
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err, "any minor version is accepted")
	assert.Equal(t, uint32(99), f.Version().Minor)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())
}

func TestImportLegacyIsReadOnly(t *testing.T) {
	s := cpuF32([]int64{4}, f32s(1, 2, 3, 4))
	s.Legacy, s.Strides = true, nil
	ct := cshim.Make(s)
	f, err := dlpack.ImportLegacy(ct.Ptr)
	require.NoError(t, err)
	assert.True(t, f.Legacy())
	assert.False(t, f.Writable())
	assert.Equal(t, dlpack.Version{}, f.Version())
	_, err = dlpack.Slice[float32](f)
	require.ErrorIs(t, err, dlpack.ErrReadOnly)
	assert.Contains(t, err.Error(), "AssumeWritable")
	ro, err := dlpack.ReadOnlySlice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4}, ro)
	v, err := dlpack.ViewOf[float32](f)
	require.NoError(t, err)
	assert.ErrorIs(t, v.Set(9, 0), dlpack.ErrReadOnly)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())

	ct = cshim.Make(s)
	f, err = dlpack.ImportLegacy(ct.Ptr, dlpack.AssumeWritable())
	require.NoError(t, err)
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	xs[3] = 40
	assert.Equal(t, 46.0, cshim.SumLegacy(ct.Ptr))
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())
}

func TestImportReadOnlyFlag(t *testing.T) {
	s := cpuF32([]int64{2}, f32s(1, 2))
	s.Flags = uint64(dlpack.FlagReadOnly | dlpack.FlagIsCopied)
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr, dlpack.AssumeWritable())
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, f.Writable(), "AssumeWritable does not override READ_ONLY")
	assert.True(t, f.IsCopied())
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrReadOnly)
	v, err := dlpack.ViewOf[float32](f)
	require.NoError(t, err)
	x, err := v.At(1)
	require.NoError(t, err)
	assert.Equal(t, float32(2), x)
	assert.ErrorIs(t, v.Set(5, 1), dlpack.ErrReadOnly)
	x, _ = v.At(1)
	assert.Equal(t, float32(2), x, "a refused Set writes nothing")
}

func TestStridedView(t *testing.T) {
	// 12 float64 values 0..11. The tensor starts at element 10 (via
	// byte_offset) and walks backwards in dim 0 and broadcasts dim 1.
	s := cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 3, Code: 2, Bits: 64, Lanes: 1,
		Shape: []int64{3, 2, 2}, Strides: []int64{-4, 0, 1}, ByteOffset: 8 * 9, Data: f64seq(12)}
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, f.IsContiguous())
	assert.Equal(t, uint64(72), f.ByteOffset())
	_, err = dlpack.Slice[float64](f)
	assert.ErrorIs(t, err, dlpack.ErrLayout)

	v, err := dlpack.ViewOf[float64](f)
	require.NoError(t, err)
	assert.Equal(t, 12, v.Len())
	assert.Equal(t, []int64{3, 2, 2}, v.Shape())
	want := []float64{9, 10, 9, 10, 5, 6, 5, 6, 1, 2, 1, 2}
	got := make([]float64, v.Len())
	n, err := v.CopyTo(got)
	require.NoError(t, err)
	assert.Equal(t, 12, n)
	assert.Equal(t, want, got)
	for i, x := range v.All() {
		assert.Equal(t, want[i], x, "element %d", i)
	}
	x, err := v.At(2, 1, 1)
	require.NoError(t, err)
	assert.Equal(t, 2.0, x)
	require.NoError(t, v.Set(100, 0, 1, 0)) // element 9, shared by the broadcast
	x, _ = v.At(0, 0, 0)
	assert.Equal(t, 100.0, x)
	assert.Panics(t, func() { v.At(3, 0, 0) }, "index out of range is a programming error")
	assert.Panics(t, func() { v.At(0, 0) }, "wrong index count is a programming error")
	_, err = v.CopyTo(make([]float64, 3))
	assert.ErrorIs(t, err, dlpack.ErrShape)

	// Early stop of the iteration.
	count := 0
	for range v.All() {
		count++
		if count == 5 {
			break
		}
	}
	assert.Equal(t, 5, count)
}

func TestViewAfterCloseAndKeepAlive(t *testing.T) {
	ct := cshim.Make(cpuF32([]int64{2}, f32s(1, 2)))
	v := func() dlpack.View[float32] { // the Foreign goes out of scope: the view alone keeps the tensor alive
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		v, err := dlpack.ViewOf[float32](f)
		require.NoError(t, err)
		return v
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	x, err := v.At(1)
	require.NoError(t, err)
	assert.Equal(t, float32(2), x)
	assert.Equal(t, int64(0), ct.Deletes())
	require.NoError(t, v.Foreign().Close())
	assert.Equal(t, int64(1), ct.Deletes())
	_, err = v.At(1)
	assert.ErrorIs(t, err, dlpack.ErrClosed, "use after Close is an error, not a crash")
	assert.ErrorIs(t, v.Set(1, 0), dlpack.ErrClosed)
	for range v.All() {
		t.Fatal("a closed view yields nothing")
	}
}

func TestImportShapesEdgeCases(t *testing.T) {
	t.Run("0-d with NULL shape", func(t *testing.T) {
		s := cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 0, Code: 2, Bits: 32, Lanes: 1, ShapeNull: true, Data: f32s(7)}
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		assert.Equal(t, 0, f.NDim())
		assert.Equal(t, int64(1), f.Len())
		assert.Equal(t, []int64{}, f.Shape())
		xs, err := dlpack.Slice[float32](f)
		require.NoError(t, err)
		assert.Equal(t, []float32{7}, xs)
		v, err := dlpack.ViewOf[float32](f)
		require.NoError(t, err)
		x, err := v.At()
		require.NoError(t, err)
		assert.Equal(t, float32(7), x)
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes())
	})
	for pos := 0; pos < 3; pos++ {
		t.Run("zero-size with NULL data", func(t *testing.T) {
			shape := []int64{2, 3, 4}
			shape[pos] = 0
			ct := cshim.Make(cpuF32(shape, nil))
			f, err := dlpack.Import(ct.Ptr)
			require.NoError(t, err)
			assert.Equal(t, int64(0), f.Len())
			assert.Equal(t, uintptr(0), f.DataAddr())
			xs, err := dlpack.Slice[float32](f)
			require.NoError(t, err)
			assert.Empty(t, xs)
			v, err := dlpack.ViewOf[float32](f)
			require.NoError(t, err)
			for range v.All() {
				t.Fatal("an empty view yields nothing")
			}
			f.Close()
			assert.Equal(t, int64(1), ct.Deletes(), "empty tensors are released too")
		})
	}
	t.Run("64 dimensions", func(t *testing.T) {
		shape := make([]int64, 64)
		for i := range shape {
			shape[i] = 1
		}
		shape[63] = 2
		ct := cshim.Make(cpuF32(shape, f32s(1, 2)))
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		assert.Equal(t, 64, f.NDim())
		xs, err := dlpack.Slice[float32](f)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2}, xs)
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes())
	})
	t.Run("size-1 dimensions with odd strides are compact", func(t *testing.T) {
		s := cpuF32([]int64{1, 3, 1}, f32s(1, 2, 3))
		s.Strides = []int64{99, 1, -7}
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		assert.True(t, f.IsContiguous())
		xs, err := dlpack.Slice[float32](f)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3}, xs)
		f.Close()
	})
	t.Run("sub-byte type", func(t *testing.T) {
		s := cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 1, Code: 17, Bits: 4, Lanes: 1,
			Shape: []int64{5}, Strides: []int64{1}, Data: []byte{0x21, 0x43, 0x05}}
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		assert.Equal(t, int64(3), f.NBytes())
		_, err = dlpack.Slice[uint8](f)
		assert.ErrorIs(t, err, dlpack.ErrTypeMismatch)
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes())
	})
}

func TestImportDevices(t *testing.T) {
	s := cpuF32([]int64{4}, nil)
	s.DeviceType, s.DeviceID, s.DataAddr = 2, 1, 0x7f0000001000
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err, "device tensors import; only CPU views are refused")
	assert.Equal(t, dlpack.Device{Type: dlpack.CUDA, ID: 1}, f.Device())
	assert.Equal(t, uintptr(0x7f0000001000), f.DataAddr(), "the device pointer is kept as is")
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrDevice)
	_, err = dlpack.ViewOf[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrDevice)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())

	s = cpuF32([]int64{2}, f32s(3, 4))
	s.DeviceType = 3 // CUDAHost: host memory
	ct = cshim.Make(s)
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrDevice, "host memory needs AllowHostMemory")
	_, _, errBytes := dlpack.ReadOnlyBytes(f)
	for _, err := range []error{err, errBytes} { // the hint names every type AllowHostMemory permits
		for _, ty := range []string{"CUDAHost", "ROCMHost", "TPUHost", "CUDAManaged"} {
			assert.Contains(t, err.Error(), ty)
		}
	}
	f.Close()
	ct = cshim.Make(s)
	f, err = dlpack.Import(ct.Ptr, dlpack.AllowHostMemory())
	require.NoError(t, err)
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 4}, xs)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())

	// The device types added on the specification's main branch import;
	// TPUHost (JAX's pinned host memory) is host memory, TPU and Ascend
	// device memory.
	for _, c := range []struct {
		ty   dlpack.DeviceType
		host bool
	}{{dlpack.TPUHost, true}, {dlpack.TPU, false}, {dlpack.Ascend, false}} {
		s := cpuF32([]int64{2}, f32s(5, 6))
		s.DeviceType = int32(c.ty)
		ct := cshim.Make(s)
		f, err := dlpack.Import(ct.Ptr, dlpack.AllowHostMemory())
		require.NoError(t, err, "%v", c.ty)
		assert.Equal(t, c.ty, f.Device().Type)
		xs, err := dlpack.Slice[float32](f)
		if c.host {
			require.NoError(t, err, "%v", c.ty)
			assert.Equal(t, []float32{5, 6}, xs)
		} else {
			assert.ErrorIs(t, err, dlpack.ErrDevice, "%v", c.ty)
		}
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes())
	}
}

func TestImportMisaligned(t *testing.T) {
	s := cpuF32([]int64{2}, f32s(1, 2))
	s.DataShift = 1
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err, "alignment is checked by views, not by import")
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrAlignment)
	u, err := dlpack.Slice[uint8](f)
	assert.ErrorIs(t, err, dlpack.ErrTypeMismatch)
	assert.Nil(t, u)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())
}

func TestConcurrentClose(t *testing.T) {
	for round := 0; round < 50; round++ {
		ct := cshim.Make(cpuF32([]int64{2}, f32s(1, 2)))
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				f.Close()
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(1), ct.Deletes(), "eight concurrent Closes call the deleter once")
	}
}

// waitFor runs GC until cond holds or a few seconds pass.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return cond()
}

func TestCleanupReleasesUnclosed(t *testing.T) {
	before := dlpack.ReadStats().LeakedImports
	var cts []cshim.Tensor
	for i := 0; i < 100; i++ {
		ct := cshim.Make(cpuF32([]int64{2}, f32s(1, 2)))
		cts = append(cts, ct)
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		if i%2 == 0 {
			f.Close()
		}
	}
	require.True(t, waitFor(func() bool {
		for _, ct := range cts {
			if ct.Deletes() != 1 {
				return false
			}
		}
		return true
	}), "every import is released, closed or not")
	for _, ct := range cts {
		assert.Equal(t, int64(1), ct.Deletes())
	}
	assert.Equal(t, int64(50), dlpack.ReadStats().LeakedImports-before, "the cleanup counts what nobody closed")
}

func TestBorrow(t *testing.T) {
	ct := cshim.Make(cpuF32([]int64{3}, f32s(1, 2, 3)))
	var kept dlpack.Foreign
	var keptView dlpack.View[float32]
	err := dlpack.Borrow(ct.Ptr, func(f dlpack.Foreign) error {
		xs, err := dlpack.Slice[float32](f)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3}, xs)
		kept = f
		keptView, err = dlpack.ViewOf[float32](f)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), ct.Deletes(), "released when fn returns")
	assert.True(t, kept.Closed(), "a handle kept past the scope reads as closed")
	_, err = dlpack.Slice[float32](kept)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
	_, err = keptView.At(0)
	assert.ErrorIs(t, err, dlpack.ErrClosed)

	// The pooled state is reused by the next Borrow; the stale handle must
	// still read as closed and must not close the new tensor.
	ct2 := cshim.Make(cpuF32([]int64{1}, f32s(5)))
	err = dlpack.Borrow(ct2.Ptr, func(f dlpack.Foreign) error {
		assert.True(t, kept.Closed())
		kept.Close()
		assert.False(t, f.Closed())
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), ct2.Deletes())

	sentinel := errors.New("consumer failed")
	ct3 := cshim.Make(cpuF32([]int64{1}, f32s(5)))
	err = dlpack.Borrow(ct3.Ptr, func(f dlpack.Foreign) error { return sentinel })
	assert.ErrorIs(t, err, sentinel)
	assert.Equal(t, int64(1), ct3.Deletes())

	ct4 := cshim.Make(cpuF32([]int64{1}, f32s(5)))
	assert.Panics(t, func() {
		_ = dlpack.Borrow(ct4.Ptr, func(f dlpack.Foreign) error { panic("boom") })
	})
	assert.Equal(t, int64(1), ct4.Deletes(), "released even when fn panics")

	ct5 := cshim.Make(cpuF32([]int64{1}, f32s(5)))
	err = dlpack.Borrow(ct5.Ptr, func(f dlpack.Foreign) error {
		f.Close()
		assert.Equal(t, int64(1), ct5.Deletes(), "fn may close early")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), ct5.Deletes())

	s := cpuF32([]int64{2}, f32s(1, 2))
	s.Legacy = true
	ct6 := cshim.Make(s)
	err = dlpack.BorrowLegacy(ct6.Ptr, func(f dlpack.Foreign) error {
		assert.True(t, f.Legacy())
		_, err := dlpack.Slice[float32](f)
		return err
	}, dlpack.AssumeWritable())
	require.NoError(t, err)
	assert.Equal(t, int64(1), ct6.Deletes())
}

func TestSpan(t *testing.T) {
	// A 2x2 window with row stride 3 of a 2x3 buffer: 1 2 . / 4 5 .
	s := cpuF32([]int64{2, 2}, f32s(1, 2, 3, 4, 5, 6))
	s.Strides = []int64{3, 1}
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	xs, err := dlpack.Span[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5}, xs, "first to last element")
	_, err = dlpack.Slice[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrLayout)
	f.Close()

	s.Strides = []int64{-3, 1}
	s.ByteOffset = 12
	ct = cshim.Make(s)
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	_, err = dlpack.Span[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrLayout, "negative strides have no span")
	f.Close()

	s = cpuF32([]int64{2}, f32s(1, 2))
	s.Flags = 1
	ct = cshim.Make(s)
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	_, err = dlpack.Span[float32](f)
	assert.ErrorIs(t, err, dlpack.ErrReadOnly)
	ro, err := dlpack.ReadOnlySpan[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, ro)
	f.Close()
}

// TestCloseRacesCleanup: owners closed from goroutines while other owners
// are dropped and a goroutine forces GC cycles (so cleanups run at the same
// time as Closes). Every tensor is released exactly once, and exactly the
// dropped ones are counted as leaked.
func TestCloseRacesCleanup(t *testing.T) {
	const n = 400
	before := dlpack.ReadStats().LeakedImports
	cts := make([]cshim.Tensor, n)
	owners := make(chan dlpack.Foreign, n)
	for i := range cts {
		cts[i] = cshim.Make(cpuF32([]int64{1}, f32s(1)))
		f, err := dlpack.Import(cts[i].Ptr)
		require.NoError(t, err)
		if i%2 == 0 {
			owners <- f
		} // odd ones are dropped here
	}
	close(owners)
	stopGC := collectBackToBack()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range owners {
				f.Close()
				f.Close()
			}
		}()
	}
	wg.Wait()
	require.True(t, waitFor(func() bool { return dlpack.ReadStats().LeakedImports-before == n/2 }))
	stopGC()
	for i, ct := range cts {
		require.Equal(t, int64(1), ct.Deletes(), "tensor %d", i)
	}
	assert.Equal(t, int64(n/2), dlpack.ReadStats().LeakedImports-before)
}

// TestStaleCloseCannotReleaseLaterScope: Borrow reuses its state, so a
// handle kept past its scope points at a state that a later Borrow holds.
// Closing such a stale handle, even while later scopes start and end on
// another goroutine, must release nothing: every later scope keeps its
// tensor until it returns.
func TestStaleCloseCannotReleaseLaterScope(t *testing.T) {
	stale := make(chan dlpack.Foreign, 64)
	done := make(chan struct{})
	var closer sync.WaitGroup
	closer.Add(1)
	go func() {
		defer closer.Done()
		for {
			select {
			case f := <-stale:
				for range 4 {
					require.NoError(t, f.Close())
				}
			case <-done:
				return
			}
		}
	}()
	early := 0
	for i := range 20000 {
		var kept dlpack.Foreign
		err := dlpack.Borrow(cshim.BenchMake(), func(f dlpack.Foreign) error {
			kept = f
			for range 8 {
				if f.Closed() {
					early++
				}
				runtime.Gosched()
			}
			if i%7 == 0 {
				return f.Close() // an early Close races with stale ones too
			}
			return nil
		})
		require.NoError(t, err)
		require.True(t, kept.Closed())
		select {
		case stale <- kept: // the other goroutine closes it while later scopes run
		default:
		}
	}
	close(done)
	closer.Wait()
	assert.Zero(t, early, "scopes whose tensor was released before they returned (by a stale handle)")
}

// TestBorrowBatch: every tensor is validated and viewable inside fn, those
// fn did not close are released when it returns (once each), handles kept
// past fn read as closed, and our own Go exports in the batch are released
// in Go.
func TestBorrowBatch(t *testing.T) {
	var cts []cshim.Tensor
	var ps []unsafe.Pointer
	for i := range 5 {
		ct := cshim.Make(cpuF32([]int64{2}, f32s(float32(i), float32(10*i))))
		cts = append(cts, ct)
		ps = append(ps, ct.Ptr)
	}
	goData := []float32{7, 8, 9}
	m, err := dlpack.Export(goData, []int64{3})
	require.NoError(t, err)
	ps = append(ps, unsafe.Pointer(m))

	fs := make([]dlpack.Foreign, len(ps)+2) // longer than ps is fine
	var seen []float32
	err = dlpack.BorrowBatch(ps, fs, func(fs []dlpack.Foreign) error {
		require.Len(t, fs, len(ps))
		for _, f := range fs {
			xs, err := dlpack.Slice[float32](f)
			require.NoError(t, err)
			seen = append(seen, xs...)
		}
		fs[1].Close() // an early Close releases now, and only once
		assert.Equal(t, int64(1), cts[1].Deletes())
		assert.Equal(t, int64(0), cts[2].Deletes(), "the others wait for fn to return")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 1, 10, 2, 20, 3, 30, 4, 40, 7, 8, 9}, seen)
	for i, ct := range cts {
		assert.Equal(t, int64(1), ct.Deletes(), "tensor %d released exactly once", i)
	}
	for _, f := range fs[:len(ps)] {
		assert.True(t, f.Closed(), "handles kept past fn read as closed")
	}
	requireNoOutstanding(t)

	// fn's error comes back; a panic in fn still releases everything.
	sentinel := errors.New("consumer failed")
	a, b := cshim.Make(cpuF32([]int64{1}, f32s(1))), cshim.Make(cpuF32([]int64{1}, f32s(2)))
	err = dlpack.BorrowBatch([]unsafe.Pointer{a.Ptr, b.Ptr}, fs, func([]dlpack.Foreign) error { return sentinel })
	assert.ErrorIs(t, err, sentinel)
	c := cshim.Make(cpuF32([]int64{1}, f32s(3)))
	assert.Panics(t, func() {
		_ = dlpack.BorrowBatch([]unsafe.Pointer{c.Ptr}, fs, func([]dlpack.Foreign) error { panic("boom") })
	})
	for _, ct := range []cshim.Tensor{a, b, c} {
		assert.Equal(t, int64(1), ct.Deletes())
	}

	// Too few handles: a programming error, refused before taking anything.
	d := cshim.Make(cpuF32([]int64{1}, f32s(4)))
	assert.Panics(t, func() {
		_ = dlpack.BorrowBatch([]unsafe.Pointer{d.Ptr}, nil, func([]dlpack.Foreign) error { return nil })
	})
	assert.Equal(t, int64(0), d.Deletes(), "still the caller's")
	require.NoError(t, dlpack.BorrowBatch([]unsafe.Pointer{d.Ptr}, fs, func([]dlpack.Foreign) error { return nil }))
	assert.Equal(t, int64(1), d.Deletes())

	// Legacy tensors.
	l := cpuF32([]int64{2}, f32s(5, 6))
	l.Legacy = true
	lt := cshim.Make(l)
	err = dlpack.BorrowBatchLegacy([]unsafe.Pointer{lt.Ptr}, fs, func(fs []dlpack.Foreign) error {
		xs, err := dlpack.ReadOnlySlice[float32](fs[0])
		assert.Equal(t, []float32{5, 6}, xs)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), lt.Deletes())
}

// TestBorrowBatchRejects: one bad tensor fails the batch before fn runs;
// every tensor, before and after it, is released exactly once, and the
// error names its index and field.
func TestBorrowBatchRejects(t *testing.T) {
	good1 := cshim.Make(cpuF32([]int64{1}, f32s(1)))
	bad := cpuF32([]int64{1}, f32s(2))
	bad.Code = 99
	badT := cshim.Make(bad)
	good2 := cshim.Make(cpuF32([]int64{1}, f32s(3)))
	m, err := dlpack.Export([]float32{4}, []int64{1}) // ours, after the bad one
	require.NoError(t, err)
	fs := make([]dlpack.Foreign, 4)
	called := false
	err = dlpack.BorrowBatch([]unsafe.Pointer{good1.Ptr, badT.Ptr, good2.Ptr, unsafe.Pointer(m)}, fs,
		func([]dlpack.Foreign) error { called = true; return nil })
	require.ErrorIs(t, err, dlpack.ErrDataType)
	var fe *dlpack.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "ps[1].dl_tensor.dtype.code", fe.Field)
	assert.False(t, called)
	for _, ct := range []cshim.Tensor{good1, badT, good2} {
		assert.Equal(t, int64(1), ct.Deletes())
	}
	requireNoOutstanding(t)
	assert.True(t, fs[0].Closed())

	// A nil entry is a bad tensor too; the others are released.
	g := cshim.Make(cpuF32([]int64{1}, f32s(5)))
	err = dlpack.BorrowBatch([]unsafe.Pointer{nil, g.Ptr}, fs, func([]dlpack.Foreign) error { return nil })
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	assert.Equal(t, int64(1), g.Deletes())
}
