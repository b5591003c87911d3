package dlgomlx

import (
	"github.com/godlpack/dlpack"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// The element types both sides have. GoMLX v0.26.0 stores float16 as
// github.com/x448/float16.Float16 and bfloat16 as its own
// bfloat16.BFloat16: both are the IEEE/brain bit pattern in a uint16, as
// minifloat.Float16 and minifloat.BFloat16 are (checked over all 65,536
// patterns in the tests), so the bytes pass unchanged. Bool is one byte
// holding 0 or 1 on both sides. GoMLX's float8, int4/uint4, int2/uint2 and
// float4 types have no Go storage type in v0.26.0 (tensors of them cannot
// be made), so they are not bridged.
var toDLPack = map[dtypes.DType]dlpack.DataType{
	dtypes.Bool:       dlpack.Bool,
	dtypes.Int8:       dlpack.Int8,
	dtypes.Int16:      dlpack.Int16,
	dtypes.Int32:      dlpack.Int32,
	dtypes.Int64:      dlpack.Int64,
	dtypes.Uint8:      dlpack.Uint8,
	dtypes.Uint16:     dlpack.Uint16,
	dtypes.Uint32:     dlpack.Uint32,
	dtypes.Uint64:     dlpack.Uint64,
	dtypes.Float16:    dlpack.Float16,
	dtypes.BFloat16:   dlpack.BFloat16,
	dtypes.Float32:    dlpack.Float32,
	dtypes.Float64:    dlpack.Float64,
	dtypes.Complex64:  dlpack.Complex64,
	dtypes.Complex128: dlpack.Complex128,
}

var fromDLPack = func() map[dlpack.DataType]dtypes.DType {
	m := make(map[dlpack.DataType]dtypes.DType, len(toDLPack))
	for g, d := range toDLPack {
		m[d] = g
	}
	return m
}()

// DataType returns the DLPack data type of a GoMLX dtype, and whether the
// bridge carries it.
func DataType(dt dtypes.DType) (dlpack.DataType, bool) {
	d, ok := toDLPack[dt]
	return d, ok
}

// DType returns the GoMLX dtype of a DLPack data type, and whether the
// bridge carries it.
func DType(dt dlpack.DataType) (dtypes.DType, bool) {
	g, ok := fromDLPack[dt]
	return g, ok
}
