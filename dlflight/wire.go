package dlflight

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
)

// What a tensor looks like on the wire: record batches of one column of
// Arrow's canonical extension type arrow.fixed_shape_tensor (storage a
// FixedSizeList of the element type), one row per index of the tensor's
// first dimension. An (d0, d1, ..., dk) tensor is d0 rows of shape
// [d1, ..., dk]; a 1-d tensor of d0 elements is d0 rows of shape [1]; a 0-d
// tensor one row of shape [1]. The schema's metadata carries the tensor's
// own shape and dtype (keys MetaShape and MetaDType), so a 1-d or 0-d
// tensor comes back as it went; peers that do not set them (a pyarrow
// client) send the (rows, shape...) tensor the column describes.
const (
	// MetaShape is the schema metadata key of the tensor's shape, a JSON
	// array of integers.
	MetaShape = "dlflight:shape"
	// MetaDType is the schema metadata key of the tensor's DLPack data
	// type ("float32", "int8", ...).
	MetaDType = "dlflight:dtype"

	extensionName = "arrow.fixed_shape_tensor"
	extNameKey    = "ARROW:extension:name"
	extMetaKey    = "ARROW:extension:metadata"
)

// dtypes are the element types Arrow has and DLPack shares: the numeric
// primitive types (booleans are bits in Arrow, bytes in DLPack).
var dtypes = []struct {
	dl dlpack.DataType
	ar arrow.DataType
}{
	{dlpack.Int8, arrow.PrimitiveTypes.Int8},
	{dlpack.Int16, arrow.PrimitiveTypes.Int16},
	{dlpack.Int32, arrow.PrimitiveTypes.Int32},
	{dlpack.Int64, arrow.PrimitiveTypes.Int64},
	{dlpack.Uint8, arrow.PrimitiveTypes.Uint8},
	{dlpack.Uint16, arrow.PrimitiveTypes.Uint16},
	{dlpack.Uint32, arrow.PrimitiveTypes.Uint32},
	{dlpack.Uint64, arrow.PrimitiveTypes.Uint64},
	{dlpack.Float16, arrow.FixedWidthTypes.Float16},
	{dlpack.Float32, arrow.PrimitiveTypes.Float32},
	{dlpack.Float64, arrow.PrimitiveTypes.Float64},
}

func arrowOf(dt dlpack.DataType) (arrow.DataType, error) {
	for _, d := range dtypes {
		if d.dl == dt {
			return d.ar, nil
		}
	}
	return nil, &dlpack.FieldError{Field: "dtype", Value: dt, Err: ErrType, Why: "Arrow's fixed_shape_tensor holds int8..int64, uint8..uint64, float16, float32 and float64"}
}

func dlpackOf(at arrow.DataType) (dlpack.DataType, bool) {
	for _, d := range dtypes {
		if arrow.TypeEqual(d.ar, at) {
			return d.dl, true
		}
	}
	return dlpack.DataType{}, false
}

// Info describes a tensor a server holds, as ListFlights and
// GetFlightInfo report it.
type Info struct {
	Name  string
	DType dlpack.DataType
	Shape []int64
	Bytes int64
}

type infoJSON struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Bytes int64   `json:"bytes"`
}

func (i Info) appMetadata() []byte {
	b, _ := json.Marshal(infoJSON{Name: i.Name, DType: i.DType.String(), Shape: i.Shape, Bytes: i.Bytes})
	return b
}

// layout is how a tensor of a shape travels: rows of width elements of the
// shape rowShape.
type layout struct {
	dtype    dlpack.DataType
	arrow    arrow.DataType
	shape    []int64
	rows     int64
	rowShape []int64
	width    int64
	nbytes   int64
}

// numel multiplies shape, refusing products beyond 2^63-1 and negative
// dimensions.
func numel(shape []int64, field string) (int64, error) {
	n := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, &dlpack.FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Value: d, Err: ErrShape, Why: "negative dimension"}
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, &dlpack.FieldError{Field: field, Value: shape, Err: ErrShape, Why: "the number of elements overflows int64"}
		}
		n = lo
	}
	return int64(n), nil
}

func layoutOf(dt dlpack.DataType, shape []int64) (layout, error) {
	at, err := arrowOf(dt)
	if err != nil {
		return layout{}, err
	}
	if len(shape) > dlpack.MaxNDim {
		return layout{}, &dlpack.FieldError{Field: "shape", Value: shape, Err: ErrShape, Why: "more than " + strconv.Itoa(dlpack.MaxNDim) + " dimensions"}
	}
	n, err := numel(shape, "shape")
	if err != nil {
		return layout{}, err
	}
	if _, ok := mulOK(n, int64(dt.ItemSize())); !ok {
		return layout{}, &dlpack.FieldError{Field: "shape", Value: shape, Err: ErrShape, Why: "the byte size overflows int64"}
	}
	l := layout{dtype: dt, arrow: at, shape: append([]int64{}, shape...), nbytes: n * int64(dt.ItemSize())}
	switch len(shape) {
	case 0:
		l.rows, l.rowShape = 1, []int64{1}
	case 1:
		l.rows, l.rowShape = shape[0], []int64{1}
	default:
		l.rows, l.rowShape = shape[0], append([]int64{}, shape[1:]...)
	}
	l.width, _ = numel(l.rowShape, "shape")
	for i, d := range l.rowShape {
		if d < 1 || l.width > math.MaxInt32 {
			return layout{}, &dlpack.FieldError{Field: fmt.Sprintf("shape[%d]", i+1), Value: d, Err: ErrShape,
				Why: "a fixed_shape_tensor row holds 1 to 2^31-1 elements (Arrow has no empty FixedSizeList)"}
		}
	}
	return l, nil
}

func mulOK(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(lo), hi == 0 && lo <= math.MaxInt64
}

func (l layout) rowBytes() int64 { return l.width * int64(l.dtype.ItemSize()) }

// schema is the one-column schema of the tensor's batches.
func (l layout) schema(column string) *arrow.Schema {
	shape, _ := json.Marshal(l.shape)
	rowShape, _ := json.Marshal(map[string][]int64{"shape": l.rowShape})
	field := arrow.Field{Name: column, Type: arrow.FixedSizeListOfNonNullable(int32(l.width), l.arrow),
		Metadata: arrow.NewMetadata([]string{extNameKey, extMetaKey}, []string{extensionName, string(rowShape)})}
	md := arrow.NewMetadata([]string{MetaShape, MetaDType}, []string{string(shape), l.dtype.String()})
	return arrow.NewSchema([]arrow.Field{field}, &md)
}

// batch wraps rows [from, from+n) of the tensor's bytes as a record batch
// sharing them (a buffer that frees nothing: the caller keeps data alive
// while the batch is written).
func (l layout) batch(schema *arrow.Schema, data []byte, from, n int64) arrow.RecordBatch {
	rb := l.rowBytes()
	var raw []byte
	if n > 0 {
		raw = data[from*rb : (from+n)*rb]
	}
	values := array.NewData(l.arrow, int(n*l.width), []*memory.Buffer{nil, memory.NewBufferBytes(raw)}, nil, 0, 0)
	defer values.Release()
	list := array.NewData(schema.Field(0).Type, int(n), []*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0)
	defer list.Release()
	col := array.MakeFromData(list)
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, n)
}

// piece is one received record batch checked against the schema: rows of
// a tensor whose bytes are data, shared with the batch.
type piece struct {
	rows int64
	data []byte
}

// checkSchema reads the tensor's layout from a received schema; every
// disagreement is ErrInvalid naming the field.
func checkSchema(s *arrow.Schema) (layout, error) {
	bad := func(field string, value any, why string) error {
		return &dlpack.FieldError{Field: field, Value: value, Err: ErrInvalid, Why: why}
	}
	if s.NumFields() != 1 {
		return layout{}, bad("schema.fields", s.NumFields(), "a tensor stream has one column")
	}
	f := s.Field(0)
	var extName, extMeta string
	if et, ok := f.Type.(arrow.ExtensionType); ok {
		extName, extMeta = et.ExtensionName(), et.Serialize()
		f.Type = et.StorageType()
	} else {
		extName, _ = f.Metadata.GetValue(extNameKey)
		extMeta, _ = f.Metadata.GetValue(extMetaKey)
	}
	if extName != extensionName {
		return layout{}, bad("field.extension", extName, "the column must be "+extensionName)
	}
	fsl, ok := f.Type.(*arrow.FixedSizeListType)
	if !ok {
		return layout{}, bad("field.type", f.Type, extensionName+" needs FixedSizeList storage")
	}
	dt, ok := dlpackOf(fsl.Elem())
	if !ok {
		return layout{}, bad("field.type", fsl.Elem(), "the element type must be int8..int64, uint8..uint64, float16, float32 or float64")
	}
	var m struct {
		Shape       []int64  `json:"shape"`
		Permutation []int64  `json:"permutation"`
		DimNames    []string `json:"dim_names"`
	}
	if err := json.Unmarshal([]byte(extMeta), &m); err != nil {
		return layout{}, bad(extMetaKey, extMeta, err.Error())
	}
	// Arrow's canonical extension spec: permutation and dim_names, when
	// present, have one entry per dimension of the shape.
	if m.Permutation != nil && len(m.Permutation) != len(m.Shape) {
		return layout{}, bad(extMetaKey+".permutation", m.Permutation, fmt.Sprintf("%d entries for the %d dimensions of shape %v", len(m.Permutation), len(m.Shape), m.Shape))
	}
	if m.DimNames != nil && len(m.DimNames) != len(m.Shape) {
		return layout{}, bad(extMetaKey+".dim_names", m.DimNames, fmt.Sprintf("%d names for the %d dimensions of shape %v", len(m.DimNames), len(m.Shape), m.Shape))
	}
	w, err := numel(m.Shape, extMetaKey+".shape")
	if err != nil {
		return layout{}, bad(extMetaKey+".shape", m.Shape, err.Error())
	}
	if w != int64(fsl.Len()) {
		return layout{}, bad(extMetaKey+".shape", m.Shape, fmt.Sprintf("holds %d elements, the storage FixedSizeList<%d>", w, fsl.Len()))
	}
	for i, p := range m.Permutation {
		if p != int64(i) {
			return layout{}, bad(extMetaKey+".permutation", m.Permutation, "only row-major tensors are taken")
		}
	}
	if len(m.Shape) == 0 {
		m.Shape = []int64{1}
	}
	var l layout
	if shapeJSON, ok := s.Metadata().GetValue(MetaShape); ok {
		var shape []int64
		if err := json.Unmarshal([]byte(shapeJSON), &shape); err != nil {
			return layout{}, bad(MetaShape, shapeJSON, err.Error())
		}
		if l, err = layoutOf(dt, shape); err != nil {
			return layout{}, bad(MetaShape, shape, err.Error())
		}
		if l.width != w {
			return layout{}, bad(MetaShape, shape, fmt.Sprintf("rows of %d elements, the column's of %d", l.width, w))
		}
		if name, ok := s.Metadata().GetValue(MetaDType); ok && name != dt.String() {
			return layout{}, bad(MetaDType, name, "the column holds "+dt.String())
		}
	} else {
		// (rows, shape...), rows counted as they arrive
		if l, err = layoutOf(dt, append([]int64{0}, m.Shape...)); err != nil {
			return layout{}, bad(extMetaKey+".shape", m.Shape, err.Error())
		}
		l.rows = -1
	}
	return l, nil
}

// checkBatch checks a received batch against the layout: one column of
// the schema's type, no nulls at any level, the values inside their
// buffer.
func checkBatch(l layout, rec arrow.RecordBatch) (piece, error) {
	bad := func(field string, value any, why string) error {
		return &dlpack.FieldError{Field: field, Value: value, Err: ErrInvalid, Why: why}
	}
	if rec.NumCols() != 1 {
		return piece{}, bad("batch.columns", rec.NumCols(), "a tensor batch has one column")
	}
	col := rec.Column(0)
	if ext, ok := col.(array.ExtensionArray); ok {
		col = ext.Storage()
	}
	fsl, ok := col.(*array.FixedSizeList)
	if !ok {
		return piece{}, bad("batch.column.type", col.DataType(), "not a FixedSizeList")
	}
	if col.NullN() != 0 {
		return piece{}, bad("batch.column.null_count", col.NullN(), "a tensor has no nulls")
	}
	values := fsl.ListValues()
	if values.NullN() != 0 {
		return piece{}, bad("batch.column.values.null_count", values.NullN(), "a tensor has no nulls")
	}
	if !arrow.TypeEqual(values.DataType(), l.arrow) {
		return piece{}, bad("batch.column.values.type", values.DataType(), "the schema says "+l.arrow.String())
	}
	rows := int64(col.Len())
	first, ok1 := mulOK(int64(col.Data().Offset()), l.width)
	n, ok2 := mulOK(rows, l.width)
	if !ok1 || !ok2 {
		return piece{}, bad("batch.length", rows, "the element count overflows")
	}
	first += int64(values.Data().Offset())
	item := int64(l.dtype.ItemSize())
	var buf []byte
	if bs := values.Data().Buffers(); len(bs) > 1 && bs[1] != nil {
		buf = bs[1].Bytes()
	}
	lo, ok1 := mulOK(first, item)
	hi, ok2 := mulOK(first+n, item)
	if !ok1 || !ok2 || first+n < first || hi > int64(len(buf)) {
		return piece{}, bad("batch.column.values.buffers[1]", len(buf), fmt.Sprintf("%d rows of %d elements from element %d do not fit", rows, l.width, first))
	}
	return piece{rows: rows, data: buf[lo:hi:hi]}, nil
}
