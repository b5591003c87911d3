package dlarrow

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// CopyFromArray is the explicit copy for what FromArray refuses to share: it
// copies a flat array into a new Go tensor (a 1-d dlpack.Array, 256-byte
// aligned, writable, owned by the caller), with null entries replaced by
// fill. Boolean arrays are unpacked into bytes (T = bool). T must be the
// element type of the array's storage (int32 for date32 and time32, int64
// for the other temporal types, minifloat.Float16 for float16); otherwise
// it fails with dlpack.ErrTypeMismatch. Other types fail as in FromArray.
func CopyFromArray[T dlpack.Element](arr arrow.Array, fill T) (*dlpack.Array[T], error) {
	if nilcheck.IsNil(arr) {
		return nil, nilArgument("array", arr)
	}
	want := dlpack.DataTypeOf[T]()
	n := arr.Len()
	out := dlpack.AlignedSlice[T](n)
	if b, ok := arr.(*array.Boolean); ok {
		if want != dlpack.Bool {
			return nil, &dlpack.FieldError{Field: "array.type", Value: arr.DataType(), Err: dlpack.ErrTypeMismatch, Why: "copied as " + want.String() + "; booleans copy as bool"}
		}
		bs := any(out).([]bool)
		for i := range bs {
			bs[i] = b.Value(i)
		}
	} else {
		l, err := valuesOf(arr, "array", 0, n) // nulls are filled below
		if err != nil {
			return nil, err
		}
		if l.st.dt != want {
			return nil, &dlpack.FieldError{Field: "array.type", Value: arr.DataType(), Err: dlpack.ErrTypeMismatch, Why: "stored as " + l.st.dt.String() + ", copied as " + want.String()}
		}
		if n > 0 {
			copy(out, unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(l.buf))), l.first+n)[l.first:])
		}
	}
	if arr.NullN() > 0 {
		for i := range out {
			if arr.IsNull(i) {
				out[i] = fill
			}
		}
	}
	return dlpack.NewArray(out, []int64{int64(n)}), nil
}
