package dlarrow

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/godlpack/dlpack"
)

// Sentinel errors. Every refusal of this package wraps one of them (or a
// sentinel of package dlpack) and is a *dlpack.FieldError naming the field
// and value; errors.Is tells them apart.
var (
	// ErrNulls: the array (or a child of a FixedSizeList) has null
	// entries, which DLPack cannot express. CopyFromArray makes a dense copy with
	// the nulls replaced by a fill value.
	ErrNulls = errors.New("dlarrow: array has nulls")
	// ErrBitPacked: Arrow booleans are bits, DLPack booleans are bytes.
	// CopyFromArray unpacks them into a bool tensor.
	ErrBitPacked = errors.New("dlarrow: Arrow booleans are bit-packed")
	// ErrType: the Arrow type has no DLPack tensor form (dictionary,
	// decimal, string, binary, nested lists, structs, unions, ...), or the
	// DLPack data type has no Arrow array form.
	ErrType = errors.New("dlarrow: type has no tensor form")
	// ErrBuffer: an array's values buffer is shorter than its offset and
	// length say, or a tensor's memory is not where it must be (an IPC
	// column that arrow-go copied out of the mapping), or a compressed IPC
	// batch holds a column type whose buffers are not bounded (string
	// and binary views) and is not decompressed.
	ErrBuffer = errors.New("dlarrow: buffer does not hold the data")
	// ErrFormat: a file that is not a readable Arrow IPC file: no magic,
	// a footer or message that does not fit, malformed message metadata,
	// a buffer outside its body, a footer that disagrees with the
	// messages, a compressed buffer that is not what it declares, a record
	// batch arrow-go cannot read.
	ErrFormat = errors.New("dlarrow: malformed Arrow IPC file")
	// ErrTruncated: the file was cut short (by another process) while
	// mapped, and reading a lost page faulted; see the package
	// documentation.
	ErrTruncated = errors.New("dlarrow: mapped file cut short")
)

// storage is the DLPack type of an Arrow fixed-width type, and the unit of
// a temporal one in NumPy's datetime64/timedelta64 spelling ("D", "s",
// "ms", "us", "ns"; "" for plain numbers).
type storage struct {
	dt   dlpack.DataType
	unit string
}

// storageOf maps the Arrow types a tensor can share to their storage.
// ok is false for every other type; why then explains the refusal.
func storageOf(t arrow.DataType) (s storage, err error) {
	switch t := t.(type) {
	case *arrow.Int8Type:
		return storage{dt: dlpack.Int8}, nil
	case *arrow.Int16Type:
		return storage{dt: dlpack.Int16}, nil
	case *arrow.Int32Type:
		return storage{dt: dlpack.Int32}, nil
	case *arrow.Int64Type:
		return storage{dt: dlpack.Int64}, nil
	case *arrow.Uint8Type:
		return storage{dt: dlpack.Uint8}, nil
	case *arrow.Uint16Type:
		return storage{dt: dlpack.Uint16}, nil
	case *arrow.Uint32Type:
		return storage{dt: dlpack.Uint32}, nil
	case *arrow.Uint64Type:
		return storage{dt: dlpack.Uint64}, nil
	case *arrow.Float16Type:
		return storage{dt: dlpack.Float16}, nil
	case *arrow.Float32Type:
		return storage{dt: dlpack.Float32}, nil
	case *arrow.Float64Type:
		return storage{dt: dlpack.Float64}, nil
	case *arrow.Date32Type:
		return storage{dlpack.Int32, "D"}, nil
	case *arrow.Date64Type:
		return storage{dlpack.Int64, "ms"}, nil
	case *arrow.Time32Type:
		return storage{dlpack.Int32, t.Unit.String()}, nil
	case *arrow.Time64Type:
		return storage{dlpack.Int64, t.Unit.String()}, nil
	case *arrow.TimestampType:
		return storage{dlpack.Int64, t.Unit.String()}, nil
	case *arrow.DurationType:
		return storage{dlpack.Int64, t.Unit.String()}, nil
	case *arrow.BooleanType:
		return storage{}, typeErr(ErrBitPacked, t, "Arrow stores one bit per value, DLPack one byte; CopyFromArray[bool] unpacks them")
	case *arrow.DictionaryType:
		return storage{}, typeErr(ErrType, t, "dictionary indices refer to another array; decode it first (compute.Take) or export the indices array")
	}
	switch t.ID() {
	case arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return storage{}, typeErr(ErrType, t, "decimals have no DLPack data type; cast to float64 first")
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return storage{}, typeErr(ErrType, t, "variable-size or opaque bytes are not a tensor")
	case arrow.LIST, arrow.LARGE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.MAP, arrow.STRUCT, arrow.SPARSE_UNION, arrow.DENSE_UNION, arrow.RUN_END_ENCODED:
		return storage{}, typeErr(ErrType, t, "nested types are not a tensor (only FixedSizeList of a number is)")
	}
	return storage{}, typeErr(ErrType, t, "no DLPack data type")
}

// arrowType is the Arrow type of a DLPack data type shared as an array
// (bool is only reachable through CopyToArray, which packs the bits).
func arrowType(dt dlpack.DataType) (arrow.DataType, error) {
	switch dt {
	case dlpack.Int8:
		return arrow.PrimitiveTypes.Int8, nil
	case dlpack.Int16:
		return arrow.PrimitiveTypes.Int16, nil
	case dlpack.Int32:
		return arrow.PrimitiveTypes.Int32, nil
	case dlpack.Int64:
		return arrow.PrimitiveTypes.Int64, nil
	case dlpack.Uint8:
		return arrow.PrimitiveTypes.Uint8, nil
	case dlpack.Uint16:
		return arrow.PrimitiveTypes.Uint16, nil
	case dlpack.Uint32:
		return arrow.PrimitiveTypes.Uint32, nil
	case dlpack.Uint64:
		return arrow.PrimitiveTypes.Uint64, nil
	case dlpack.Float16:
		return arrow.FixedWidthTypes.Float16, nil
	case dlpack.Float32:
		return arrow.PrimitiveTypes.Float32, nil
	case dlpack.Float64:
		return arrow.PrimitiveTypes.Float64, nil
	case dlpack.Bool:
		return arrow.FixedWidthTypes.Boolean, nil
	}
	return nil, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: dt, Err: ErrType,
		Why: "Arrow arrays hold int8..int64, uint8..uint64, float16, float32, float64 and bool"}
}

// sharedType is the Arrow type of a DLPack data type whose memory an
// Arrow array can share (ToArray): arrowType's, less bool, which Arrow
// packs into bits (ErrBitPacked).
func sharedType(dt dlpack.DataType) (arrow.DataType, error) {
	if dt == dlpack.Bool {
		return nil, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: dt, Err: ErrBitPacked, Why: "Arrow booleans are bits; CopyToArray packs them"}
	}
	t, err := arrowType(dt)
	if err != nil {
		return nil, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: dt, Err: ErrType,
			Why: "an Arrow array shares int8..int64, uint8..uint64, float16, float32 and float64 (CopyToArray also packs bool)"}
	}
	return t, nil
}

func typeErr(sentinel error, t arrow.DataType, why string) error {
	return &dlpack.FieldError{Field: "array.type", Value: t, Err: sentinel, Why: why}
}
