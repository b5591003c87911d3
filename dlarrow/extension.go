package dlarrow

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// FixedShapeTensorName is the name of Arrow's canonical extension type for
// a column of tensors of one shape (pyarrow's pa.fixed_shape_tensor):
// FixedSizeList storage, the shape in the metadata.
const FixedShapeTensorName = "arrow.fixed_shape_tensor"

const (
	extensionNameKey = "ARROW:extension:name"
	extensionMetaKey = "ARROW:extension:metadata"
)

// FromField is FromArray for a column whose field may carry an extension
// type in its metadata, as arrow-go leaves unregistered extension types
// after reading an IPC file or importing through the C Data Interface: a
// FixedShapeTensorName column becomes an (N, d1, d2, ...) tensor of its
// logical shape: the metadata's shape is the physical one, and a
// permutation reorders the dimensions through strides, as pyarrow reads it.
// Other extension types are refused with ErrType; without an extension it
// is FromArray.
func FromField(field arrow.Field, arr arrow.Array) (*Tensor, error) {
	if nilcheck.IsNil(arr) {
		return nil, nilArgument("array", arr)
	}
	name, _ := field.Metadata.GetValue(extensionNameKey)
	meta, _ := field.Metadata.GetValue(extensionMetaKey)
	if name == "" {
		return FromArray(arr)
	}
	return fromExtension(name, meta, arr)
}

// fromExtension describes the storage arr of an extension type.
func fromExtension(name, meta string, arr arrow.Array) (*Tensor, error) {
	if name != FixedShapeTensorName {
		return nil, &dlpack.FieldError{Field: "array.type", Value: name, Err: ErrType, Why: "extension types other than " + FixedShapeTensorName + " have no tensor form"}
	}
	fsl, ok := arr.DataType().(*arrow.FixedSizeListType)
	if !ok {
		return nil, &dlpack.FieldError{Field: "array.type", Value: arr.DataType(), Err: ErrType, Why: FixedShapeTensorName + " needs FixedSizeList storage"}
	}
	shape, strides, err := fixedShape(meta, int64(fsl.Len()))
	if err != nil {
		return nil, err
	}
	t, err := FromArray(arr)
	if err != nil {
		return nil, err
	}
	if len(t.shape) != 2 {
		t.Close()
		return nil, &dlpack.FieldError{Field: "array.type", Value: arr.DataType(), Err: ErrType, Why: FixedShapeTensorName + " needs a FixedSizeList of numbers"}
	}
	t.shape = append(t.shape[:1], shape...)
	if strides != nil {
		t.strides = append([]int64{int64(fsl.Len())}, strides...)
	}
	return t, nil
}

// fixedShape reads the metadata of a fixed_shape_tensor of width elements
// per row: the logical shape, and its strides in elements (nil when the
// permutation, if any, is the identity: the row-major physical layout).
func fixedShape(meta string, width int64) (shape, strides []int64, err error) {
	var m struct {
		Shape       []int64 `json:"shape"`
		Permutation []int64 `json:"permutation"`
	}
	bad := func(why string) error {
		return &dlpack.FieldError{Field: extensionMetaKey, Value: meta, Err: ErrType, Why: why}
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return nil, nil, bad(err.Error())
	}
	n := int64(1)
	for _, d := range m.Shape {
		if d < 0 {
			return nil, nil, bad("negative dimension")
		}
		if d != 0 && n > math.MaxInt64/d {
			return nil, nil, bad(fmt.Sprintf("the product of shape %v overflows int64", m.Shape))
		}
		n *= d
	}
	if n != width || len(m.Shape) > dlpack.MaxNDim-1 {
		return nil, nil, bad(fmt.Sprintf("shape %v does not hold the %d elements of a row", m.Shape, width))
	}
	if m.Permutation == nil {
		return m.Shape, nil, nil
	}
	if len(m.Permutation) != len(m.Shape) {
		return nil, nil, bad("the permutation has another length than the shape")
	}
	// The shape is the physical one, stored row-major; logical dimension
	// i is physical dimension p[i] (the spec's example: shape [100, 200,
	// 500] with permutation [2, 0, 1] is a logical [500, 100, 200]).
	physical := make([]int64, len(m.Shape))
	stride := int64(1)
	for k := len(m.Shape) - 1; k >= 0; k-- {
		physical[k] = stride
		stride *= m.Shape[k]
	}
	shape = make([]int64, len(m.Shape))
	strides = make([]int64, len(m.Shape))
	seen := make([]bool, len(m.Shape))
	identity := true
	for i, p := range m.Permutation {
		if p < 0 || int(p) >= len(m.Shape) || seen[p] {
			return nil, nil, bad("not a permutation")
		}
		seen[p] = true
		identity = identity && p == int64(i)
		shape[i], strides[i] = m.Shape[p], physical[p]
	}
	if identity {
		return m.Shape, nil, nil
	}
	return shape, strides, nil
}

// extensionOf reports the extension name and metadata of an arrow-go
// extension array (a registered extension type), and its storage.
func extensionOf(arr arrow.Array) (name, meta string, storage arrow.Array, ok bool) {
	ext, ok := arr.(array.ExtensionArray)
	if !ok {
		return "", "", nil, false
	}
	et := ext.ExtensionType()
	return et.ExtensionName(), et.Serialize(), ext.Storage(), true
}
