package dlarrow

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
)

// ToField wraps a compact row-major CPU tensor of shape (N, d1, d2, ...)
// as a column of Arrow's fixed_shape_tensor extension (pyarrow's
// pa.fixed_shape_tensor) sharing its memory: N rows, each a tensor of shape
// (d1, d2, ...), stored as a FixedSizeList<d1*d2*...> whose field carries
// the extension's name and metadata (FixedShapeTensorName, {"shape":
// [d1, d2, ...]}). It is the inverse of FromField; a 1-d tensor gives rows
// of shape []. Written with arrow-go's ipc writer, the column reads back in
// pyarrow as a FixedShapeTensorArray.
//
// Ownership is as for ToArray: on success the array owns f (release the
// array, do not Close f); on error f stays the caller's. Data types are
// those of ToArray except bool (a tensor extension holds numbers). It fails
// with dlpack.ErrLayout for strided tensors (CopyToField copies them),
// dlpack.ErrShape for 0-d tensors and rows of 2^31 elements or more, and
// ErrType for other data types. Rows of no elements (a 0 after the first
// dimension) fail with dlpack.ErrShape: arrow-go has no FixedSizeList of
// width 0.
func ToField(name string, f dlpack.Foreign) (arrow.Field, arrow.Array, error) {
	dt, width, err := fieldOf(f)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	if !f.IsContiguous() {
		return arrow.Field{}, nil, &dlpack.FieldError{Field: "dl_tensor.strides", Value: f.Strides(), Err: dlpack.ErrLayout,
			Why: "Arrow arrays are compact; CopyToField copies strided tensors"}
	}
	raw, err := tensorBytes(f)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	buf := memory.NewBufferWithAllocator(raw, closer{f})
	defer buf.Release()
	values := array.NewData(dt, int(f.Len()), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer values.Release()
	return fixedShapeColumn(name, f.Shape(), width, values)
}

// CopyToField is ToField for a CPU tensor of any layout (strided,
// broadcast, negative strides): it copies the elements, in row-major
// order, into a new buffer allocated from mem. f stays the caller's to
// close.
func CopyToField(name string, f dlpack.Foreign, mem memory.Allocator) (arrow.Field, arrow.Array, error) {
	_, width, err := fieldOf(f)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	// Each row fits an int32 and holds at least one element, so
	// CopyToArray's nesting applies (a tensor of no rows too: only its
	// first dimension is 0); its innermost values are the copy.
	arr, err := CopyToArray(f, mem)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	defer arr.Release()
	leaf := arr.Data()
	for len(leaf.Children()) == 1 {
		leaf = leaf.Children()[0]
	}
	return fixedShapeColumn(name, f.Shape(), width, leaf)
}

// fieldOf checks what a fixed_shape_tensor column can hold and returns
// the value type and the number of elements of a row.
func fieldOf(f dlpack.Foreign) (arrow.DataType, int64, error) {
	if f.NDim() == 0 {
		return nil, 0, &dlpack.FieldError{Field: "dl_tensor.ndim", Value: 0, Err: dlpack.ErrShape, Why: "the first dimension is the column's rows"}
	}
	if f.DataType() == dlpack.Bool {
		return nil, 0, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: f.DataType(), Err: ErrType,
			Why: FixedShapeTensorName + " holds numbers (pyarrow refuses bool tensors)"}
	}
	dt, err := arrowType(f.DataType())
	if err != nil {
		return nil, 0, err
	}
	width := productOf(f.Shape()[1:])
	if width < 1 || width > math.MaxInt32 {
		return nil, 0, &dlpack.FieldError{Field: "dl_tensor.shape", Value: f.Shape(), Err: dlpack.ErrShape,
			Why: fmt.Sprintf("a row of %d elements: a FixedSizeList holds 1 to 2^31-1", width)}
	}
	return dt, width, nil
}

// fixedShapeColumn wraps values (shape[0]*width elements) as shape[0]
// rows of a FixedSizeList<width> and names the extension in the field.
func fixedShapeColumn(name string, shape []int64, width int64, values arrow.ArrayData) (arrow.Field, arrow.Array, error) {
	meta, err := json.Marshal(struct {
		Shape []int64 `json:"shape"`
	}{append([]int64{}, shape[1:]...)})
	if err != nil {
		return arrow.Field{}, nil, err
	}
	typ := arrow.FixedSizeListOf(int32(width), values.DataType())
	data := array.NewData(typ, int(shape[0]), []*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0)
	defer data.Release()
	field := arrow.Field{Name: name, Type: typ, Nullable: true,
		Metadata: arrow.NewMetadata([]string{extensionNameKey, extensionMetaKey}, []string{FixedShapeTensorName, string(meta)})}
	return field, array.MakeFromData(data), nil
}
