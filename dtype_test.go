package dlpack_test

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDataTypeNamesRoundTrip(t *testing.T) {
	cases := map[string]dlpack.DataType{
		"bool": dlpack.Bool, "int8": dlpack.Int8, "int16": dlpack.Int16, "int32": dlpack.Int32, "int64": dlpack.Int64,
		"uint8": dlpack.Uint8, "uint16": dlpack.Uint16, "uint32": dlpack.Uint32, "uint64": dlpack.Uint64,
		"float16": dlpack.Float16, "float32": dlpack.Float32, "float64": dlpack.Float64,
		"bfloat16": dlpack.BFloat16, "complex64": dlpack.Complex64, "complex128": dlpack.Complex128,
		"handle64":                 dlpack.OpaqueHandle64,
		"float8_e3m4":              dlpack.Float8E3M4,
		"float8_e4m3":              dlpack.Float8E4M3,
		"float8_e4m3b11fnuz":       dlpack.Float8E4M3B11FNUZ,
		"float8_e4m3fn":            dlpack.Float8E4M3FN,
		"float8_e4m3fnuz":          dlpack.Float8E4M3FNUZ,
		"float8_e5m2":              dlpack.Float8E5M2,
		"float8_e5m2fnuz":          dlpack.Float8E5M2FNUZ,
		"float8_e8m0fnu":           dlpack.Float8E8M0FNU,
		"float6_e2m3fn":            dlpack.Float6E2M3FN,
		"float6_e3m2fn":            dlpack.Float6E3M2FN,
		"float4_e2m1fn":            dlpack.Float4E2M1FN,
		"bcomplex32":               dlpack.Bcomplex32,
		"bcomplex32x2":             {Code: dlpack.CodeBcomplex, Bits: 32, Lanes: 2},
		"dtype(code=18,bits=64)":   {Code: dlpack.CodeBcomplex, Bits: 64, Lanes: 1},
		"int8x4":                   {Code: dlpack.CodeInt, Bits: 8, Lanes: 4},
		"float4_e2m1fnx2":          {Code: dlpack.CodeFloat4E2M1FN, Bits: 4, Lanes: 2},
		"dtype(code=99,bits=8)":    {Code: 99, Bits: 8, Lanes: 1},
		"dtype(code=6,bits=1)":     {Code: dlpack.CodeBool, Bits: 1, Lanes: 1},
		"dtype(code=10,bits=16)x0": {Code: dlpack.CodeFloat8E4M3FN, Bits: 16, Lanes: 0},
	}
	for name, dt := range cases {
		assert.Equal(t, name, dt.String(), "String of %#v", dt)
		got, err := dlpack.ParseDataType(name)
		require.NoError(t, err, name)
		assert.Equal(t, dt, got, "ParseDataType(%q)", name)
	}
	// Every code of 1.3 and of the specification's main branch (18,
	// bcomplex) has a name; 19 is the first unknown one.
	for c := dlpack.DataTypeCode(0); c <= 18; c++ {
		assert.True(t, c.IsKnown())
		assert.NotContains(t, c.String(), "code(")
	}
	assert.False(t, dlpack.DataTypeCode(19).IsKnown())
	assert.Equal(t, "code(19)", dlpack.DataTypeCode(19).String())
	assert.NoError(t, dlpack.Bcomplex32.Validate())
	assert.Equal(t, 4, dlpack.Bcomplex32.ItemSize())
	assert.ErrorIs(t, dlpack.DataType{Code: dlpack.CodeBcomplex, Bits: 64, Lanes: 1}.Validate(), dlpack.ErrDataType)
}

func TestParseDataTypeErrors(t *testing.T) {
	for _, s := range []string{"", "float", "floaty32", "int8x99999", "dtype(code=1)", "dtype(code=300,bits=8)", "quux16"} {
		_, err := dlpack.ParseDataType(s)
		require.Error(t, err, s)
		assert.True(t, errors.Is(err, dlpack.ErrDataType), s)
		assert.Contains(t, err.Error(), "dtype", s)
	}
}

func TestDataTypeValidate(t *testing.T) {
	valid := []dlpack.DataType{dlpack.Bool, dlpack.Int8, dlpack.Uint64, dlpack.Float16, dlpack.Float64,
		dlpack.BFloat16, dlpack.Complex64, dlpack.Complex128, dlpack.Float8E4M3FN, dlpack.Float8E5M2,
		dlpack.Float8E8M0FNU, dlpack.Float6E2M3FN, dlpack.Float6E3M2FN, dlpack.Float4E2M1FN,
		{Code: dlpack.CodeInt, Bits: 4, Lanes: 1}, {Code: dlpack.CodeFloat, Bits: 32, Lanes: 4},
		{Code: dlpack.CodeComplex, Bits: 32, Lanes: 1}, dlpack.OpaqueHandle64}
	for _, dt := range valid {
		assert.NoError(t, dt.Validate(), dt.String())
	}
	invalid := map[string]dlpack.DataType{
		"dtype.code":  {Code: 19, Bits: 8, Lanes: 1},
		"dtype.lanes": {Code: dlpack.CodeFloat, Bits: 32, Lanes: 0},
	}
	for field, dt := range invalid {
		err := dt.Validate()
		require.ErrorIs(t, err, dlpack.ErrDataType)
		var fe *dlpack.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, field, fe.Field)
	}
	badBits := []dlpack.DataType{
		{Code: dlpack.CodeBool, Bits: 1, Lanes: 1}, {Code: dlpack.CodeBfloat, Bits: 32, Lanes: 1},
		{Code: dlpack.CodeFloat, Bits: 8, Lanes: 1}, {Code: dlpack.CodeComplex, Bits: 16, Lanes: 1},
		{Code: dlpack.CodeFloat8E4M3FN, Bits: 16, Lanes: 1}, {Code: dlpack.CodeFloat6E2M3FN, Bits: 8, Lanes: 1},
		{Code: dlpack.CodeFloat4E2M1FN, Bits: 8, Lanes: 1}, {Code: dlpack.CodeInt, Bits: 12, Lanes: 1},
		{Code: dlpack.CodeOpaqueHandle, Bits: 0, Lanes: 1},
	}
	for _, dt := range badBits {
		err := dt.Validate()
		require.ErrorIs(t, err, dlpack.ErrDataType, dt.String())
		assert.Contains(t, err.Error(), "dtype.bits")
	}
}

func TestStorageBytes(t *testing.T) {
	cases := []struct {
		dt     dlpack.DataType
		n      int64
		padded bool
		want   int64
	}{
		{dlpack.Float32, 10, false, 40},
		{dlpack.Complex128, 3, false, 48},
		{dlpack.Bool, 5, false, 5},
		{dlpack.Float4E2M1FN, 5, false, 3}, // 20 bits, packed
		{dlpack.Float4E2M1FN, 5, true, 5},  // a byte each
		{dlpack.Float6E2M3FN, 4, false, 3}, // 24 bits
		{dlpack.Float6E3M2FN, 4, true, 4},
		{dlpack.DataType{Code: dlpack.CodeFloat4E2M1FN, Bits: 4, Lanes: 2}, 3, false, 3},
		{dlpack.DataType{Code: dlpack.CodeInt, Bits: 8, Lanes: 4}, 2, false, 8},
	}
	for _, c := range cases {
		got, ok := c.dt.StorageBytes(c.n, c.padded)
		require.True(t, ok)
		assert.Equal(t, c.want, got, "%v x%d padded=%v", c.dt, c.n, c.padded)
	}
	_, ok := dlpack.Float64.StorageBytes(1<<62, false)
	assert.False(t, ok, "overflow must be reported")
	_, ok = dlpack.Float64.StorageBytes(-1, false)
	assert.False(t, ok)
	assert.Equal(t, 4, dlpack.Float32.ItemSize())
	assert.Equal(t, 0, dlpack.Float4E2M1FN.ItemSize())
	assert.True(t, dlpack.Float6E2M3FN.IsSubbyte())
}

func TestDataTypeOf(t *testing.T) {
	assert.Equal(t, dlpack.Int8, dlpack.DataTypeOf[int8]())
	assert.Equal(t, dlpack.Int16, dlpack.DataTypeOf[int16]())
	assert.Equal(t, dlpack.Int32, dlpack.DataTypeOf[int32]())
	assert.Equal(t, dlpack.Int64, dlpack.DataTypeOf[int64]())
	assert.Equal(t, dlpack.Uint8, dlpack.DataTypeOf[uint8]())
	assert.Equal(t, dlpack.Uint16, dlpack.DataTypeOf[uint16]())
	assert.Equal(t, dlpack.Uint32, dlpack.DataTypeOf[uint32]())
	assert.Equal(t, dlpack.Uint64, dlpack.DataTypeOf[uint64]())
	assert.Equal(t, dlpack.Float32, dlpack.DataTypeOf[float32]())
	assert.Equal(t, dlpack.Float64, dlpack.DataTypeOf[float64]())
	assert.Equal(t, dlpack.Complex64, dlpack.DataTypeOf[complex64]())
	assert.Equal(t, dlpack.Complex128, dlpack.DataTypeOf[complex128]())
	assert.Equal(t, dlpack.Bool, dlpack.DataTypeOf[bool]())
	assert.Equal(t, dlpack.Float16, dlpack.DataTypeOf[minifloat.Float16]())
	assert.Equal(t, dlpack.BFloat16, dlpack.DataTypeOf[minifloat.BFloat16]())
	assert.Equal(t, dlpack.Float8E4M3FN, dlpack.DataTypeOf[minifloat.E4M3FN]())
	assert.Equal(t, dlpack.Float8E5M2, dlpack.DataTypeOf[minifloat.E5M2]())
}

func TestDevices(t *testing.T) {
	names := map[string]dlpack.Device{
		"cpu": dlpack.CPUDevice, "cuda:1": {Type: dlpack.CUDA, ID: 1}, "cuda_host": {Type: dlpack.CUDAHost},
		"opencl": {Type: dlpack.OpenCL}, "vulkan:2": {Type: dlpack.Vulkan, ID: 2}, "metal": {Type: dlpack.Metal},
		"vpi": {Type: dlpack.VPI}, "rocm:3": {Type: dlpack.ROCM, ID: 3}, "rocm_host": {Type: dlpack.ROCMHost},
		"ext_dev": {Type: dlpack.ExtDev}, "cuda_managed": {Type: dlpack.CUDAManaged}, "oneapi": {Type: dlpack.OneAPI},
		"webgpu": {Type: dlpack.WebGPU}, "hexagon": {Type: dlpack.Hexagon}, "maia": {Type: dlpack.MAIA},
		"trn:7": {Type: dlpack.Trn, ID: 7}, "tpu:3": {Type: dlpack.TPU, ID: 3}, "tpu_host": {Type: dlpack.TPUHost},
		"ascend:1": {Type: dlpack.Ascend, ID: 1}, "device(42):3": {Type: 42, ID: 3},
	}
	for s, d := range names {
		assert.Equal(t, s, d.String())
		got, err := dlpack.ParseDevice(s)
		require.NoError(t, err, s)
		assert.Equal(t, d, got)
	}
	got, err := dlpack.ParseDevice("cuda:0")
	require.NoError(t, err)
	assert.Equal(t, dlpack.Device{Type: dlpack.CUDA}, got)
	for _, s := range []string{"", "gpu", "cuda:x", "cuda:99999999999"} {
		_, err := dlpack.ParseDevice(s)
		assert.ErrorIs(t, err, dlpack.ErrDevice, s)
	}
	known := 0
	for ty := dlpack.DeviceType(-1); ty < 30; ty++ {
		if ty.IsKnown() {
			known++
			assert.NoError(t, dlpack.Device{Type: ty}.Validate())
		} else {
			assert.ErrorIs(t, dlpack.Device{Type: ty}.Validate(), dlpack.ErrDevice)
		}
	}
	assert.Equal(t, 19, known, "1..21 without the unassigned 5 and 6")
	assert.False(t, dlpack.DeviceType(22).IsKnown())
	assert.Equal(t, "device(22)", dlpack.DeviceType(22).String())
	assert.ErrorIs(t, dlpack.Device{Type: dlpack.CUDA, ID: -1}.Validate(), dlpack.ErrDevice)
	assert.True(t, dlpack.CUDAManaged.HostAccessible())
	assert.False(t, dlpack.CUDA.HostAccessible())
	assert.True(t, dlpack.TPUHost.HostAccessible())
	assert.False(t, dlpack.TPU.HostAccessible())
	assert.False(t, dlpack.Ascend.HostAccessible())
}

func TestFlagsAndVersionStrings(t *testing.T) {
	assert.Equal(t, "0", dlpack.Flags(0).String())
	assert.Equal(t, "READ_ONLY|IS_COPIED|IS_SUBBYTE_TYPE_PADDED|0x10", dlpack.Flags(0x17).String())
	assert.Equal(t, "1.3", dlpack.CurrentVersion.String())
}
