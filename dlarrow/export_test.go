package dlarrow_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/tensor"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

// exported is what a Description says, read back.
func describe(t *testing.T, tn *dlarrow.Tensor) (dlpack.Description, dlpack.Releaser) {
	t.Helper()
	var d dlpack.Description
	if err := tn.DescribeTensor(&d); err != nil {
		t.Fatalf("DescribeTensor: %v", err)
	}
	r, ok := d.Owner.(dlpack.Releaser)
	if !ok {
		t.Fatalf("Owner %T is not a dlpack.Releaser", d.Owner)
	}
	return d, r
}

var numeric = []struct {
	dt   arrow.DataType
	want dlpack.DataType
	unit string
}{
	{arrow.PrimitiveTypes.Int8, dlpack.Int8, ""},
	{arrow.PrimitiveTypes.Int16, dlpack.Int16, ""},
	{arrow.PrimitiveTypes.Int32, dlpack.Int32, ""},
	{arrow.PrimitiveTypes.Int64, dlpack.Int64, ""},
	{arrow.PrimitiveTypes.Uint8, dlpack.Uint8, ""},
	{arrow.PrimitiveTypes.Uint16, dlpack.Uint16, ""},
	{arrow.PrimitiveTypes.Uint32, dlpack.Uint32, ""},
	{arrow.PrimitiveTypes.Uint64, dlpack.Uint64, ""},
	{arrow.FixedWidthTypes.Float16, dlpack.Float16, ""},
	{arrow.PrimitiveTypes.Float32, dlpack.Float32, ""},
	{arrow.PrimitiveTypes.Float64, dlpack.Float64, ""},
	{arrow.FixedWidthTypes.Date32, dlpack.Int32, "D"},
	{arrow.FixedWidthTypes.Date64, dlpack.Int64, "ms"},
	{arrow.FixedWidthTypes.Time32s, dlpack.Int32, "s"},
	{arrow.FixedWidthTypes.Time32ms, dlpack.Int32, "ms"},
	{arrow.FixedWidthTypes.Time64us, dlpack.Int64, "us"},
	{arrow.FixedWidthTypes.Time64ns, dlpack.Int64, "ns"},
	{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, dlpack.Int64, "us"},
	{arrow.FixedWidthTypes.Duration_ns, dlpack.Int64, "ns"},
}

// Every numeric and temporal type: a sliced array shares its buffer from
// its offset, read-only, and stays allocated until the export's release,
// after the caller and the Tensor have let go.
func TestFromArraySharesSlicedBuffer(t *testing.T) {
	for _, c := range numeric {
		t.Run(c.dt.String(), func(t *testing.T) {
			mem := checked(t)
			js := "[1, 2, 3, 4, 5, 6, 7, 8]"
			if c.dt.ID() == arrow.DATE64 {
				js = "[86400000, 172800000, 259200000, 345600000, 432000000, 518400000, 604800000, 691200000]"
			}
			full := fromJSON(t, mem, c.dt, js)
			arr := array.NewSlice(full, 2, 7)
			full.Release()
			tn, err := dlarrow.FromArray(arr)
			if err != nil {
				t.Fatal(err)
			}
			d, r := describe(t, tn)
			if d.DType != c.want || tn.DataType() != c.want || tn.Unit() != c.unit {
				t.Errorf("dtype %v unit %q, want %v %q", d.DType, tn.Unit(), c.want, c.unit)
			}
			if len(d.Shape) != 1 || d.Shape[0] != 5 || d.Strides != nil || !d.ReadOnly {
				t.Errorf("shape %v strides %v read-only %v, want [5] nil true", d.Shape, d.Strides, d.ReadOnly)
			}
			if got, want := uintptr(d.Data)+uintptr(d.ByteOffset), valuesAddr(arr, 0, c.want.ItemSize()); got != want {
				t.Errorf("first element at %#x, want %#x (the sliced array's)", got, want)
			}
			if d.ByteOffset+5*uint64(c.want.ItemSize()) > uint64(d.Size) {
				t.Errorf("elements end at %d, past Size %d", d.ByteOffset+5*uint64(c.want.ItemSize()), d.Size)
			}
			tn.Close()
			arr.Release()
			if mem.CurrentAlloc() == 0 {
				t.Fatal("the buffer was freed while an export still held it")
			}
			r.ReleaseTensor()
		})
	}
}

func TestFromArrayEmpty(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Float64, "[]")
	defer arr.Release()
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	d, r := describe(t, tn)
	defer r.ReleaseTensor()
	if len(d.Shape) != 1 || d.Shape[0] != 0 || d.Size != 0 {
		t.Errorf("shape %v size %d, want [0] 0", d.Shape, d.Size)
	}
}

func TestFromArrayRefusals(t *testing.T) {
	mem := checked(t)
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	cases := []struct {
		dt       arrow.DataType
		js       string
		sentinel error
		words    string
	}{
		{arrow.PrimitiveTypes.Float64, "[1, null, 3, null]", dlarrow.ErrNulls, "array.null_count = 2"},
		{arrow.FixedWidthTypes.Boolean, "[true, false]", dlarrow.ErrBitPacked, "CopyFromArray[bool]"},
		{dict, `["a", "b", "a"]`, dlarrow.ErrType, "dictionary"},
		{&arrow.Decimal128Type{Precision: 10, Scale: 2}, `["1.25"]`, dlarrow.ErrType, "decimal"},
		{arrow.BinaryTypes.String, `["a"]`, dlarrow.ErrType, "utf8"},
		{arrow.BinaryTypes.Binary, `["YQ=="]`, dlarrow.ErrType, "binary"},
		{arrow.ListOf(arrow.PrimitiveTypes.Int32), `[[1], [2, 3]]`, dlarrow.ErrType, "nested"},
		{arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}), `[{"x": 1}]`, dlarrow.ErrType, "struct"},
		{arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), `[[1, 2], null]`, dlarrow.ErrNulls, "array.null_count = 1"},
		{arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), `[[1, 2], [3, null]]`, dlarrow.ErrNulls, "array.values.null_count = 1"},
		{arrow.FixedSizeListOf(2, arrow.FixedWidthTypes.Boolean), `[[true, false]]`, dlarrow.ErrBitPacked, "array.values.type"},
	}
	for _, c := range cases {
		t.Run(c.dt.String(), func(t *testing.T) {
			arr := fromJSON(t, mem, c.dt, c.js)
			defer arr.Release()
			tn, err := dlarrow.FromArray(arr)
			if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.words) {
				t.Fatalf("FromArray = %v, %v; want an error wrapping %v mentioning %q", tn, err, c.sentinel, c.words)
			}
			var fe *dlpack.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%v is not a *dlpack.FieldError", err)
			}
		})
	}
}

// Nulls outside a slice do not matter.
func TestFromArraySliceAroundNulls(t *testing.T) {
	mem := checked(t)
	full := fromJSON(t, mem, arrow.PrimitiveTypes.Int64, "[null, 1, 2, 3, null]")
	defer full.Release()
	arr := array.NewSlice(full, 1, 4)
	defer arr.Release()
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	d, r := describe(t, tn)
	defer r.ReleaseTensor()
	got := unsafe.Slice((*int64)(unsafe.Add(d.Data, d.ByteOffset)), 3)
	if got[0] != 1 || got[2] != 3 {
		t.Errorf("values %v, want [1 2 3]", got)
	}
}

func TestFromArrayFixedSizeList(t *testing.T) {
	mem := checked(t)
	full := fromJSON(t, mem, arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Int32), "[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]")
	defer full.Release()
	arr := array.NewSlice(full, 1, 3)
	defer arr.Release()
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	d, r := describe(t, tn)
	defer r.ReleaseTensor()
	if len(d.Shape) != 2 || d.Shape[0] != 2 || d.Shape[1] != 3 {
		t.Fatalf("shape %v, want [2 3]", d.Shape)
	}
	got := unsafe.Slice((*int32)(unsafe.Add(d.Data, d.ByteOffset)), 6)
	for i, v := range got {
		if v != int32(i+4) {
			t.Fatalf("values %v, want 4..9", got)
		}
	}

	nested := fromJSON(t, mem, arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)),
		"[[[1,2],[3,4]],[[5,6],[7,8]],[[9,10],[11,12]]]")
	defer nested.Release()
	sl := array.NewSlice(nested, 2, 3)
	defer sl.Release()
	tn2, err := dlarrow.FromArray(sl)
	if err != nil {
		t.Fatal(err)
	}
	defer tn2.Close()
	d2, r2 := describe(t, tn2)
	defer r2.ReleaseTensor()
	if want := []int64{1, 2, 2}; len(d2.Shape) != 3 || d2.Shape[0] != 1 || d2.Shape[1] != 2 || d2.Shape[2] != 2 {
		t.Fatalf("shape %v, want %v", d2.Shape, want)
	}
	if v := *(*float32)(unsafe.Add(d2.Data, d2.ByteOffset)); v != 9 {
		t.Errorf("first element %v, want 9", v)
	}
}

func TestFromTensor(t *testing.T) {
	mem := checked(t)
	vals := fromJSON(t, mem, arrow.PrimitiveTypes.Float64, "[0, 1, 2, 3, 4, 5]")
	defer vals.Release()
	// a 2x3 matrix stored column-major: byte strides (8, 16)
	tt := tensor.NewFloat64(vals.Data(), []int64{2, 3}, []int64{8, 16}, nil)
	defer tt.Release()
	tn, err := dlarrow.FromTensor(tt)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	d, r := describe(t, tn)
	defer r.ReleaseTensor()
	if len(d.Strides) != 2 || d.Strides[0] != 1 || d.Strides[1] != 2 {
		t.Errorf("strides %v, want [1 2] (elements)", d.Strides)
	}
	if d.Shape[0] != 2 || d.Shape[1] != 3 || !d.ReadOnly {
		t.Errorf("shape %v read-only %v", d.Shape, d.ReadOnly)
	}
}

func TestFromChunked(t *testing.T) {
	mem := checked(t)
	a := fromJSON(t, mem, arrow.PrimitiveTypes.Int16, "[1, 2, 3]")
	b := fromJSON(t, mem, arrow.PrimitiveTypes.Int16, "[4, 5]")
	c := arrow.NewChunked(arrow.PrimitiveTypes.Int16, []arrow.Array{a, b})
	a.Release()
	b.Release()
	defer c.Release()
	ts, err := dlarrow.FromChunked(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Shape()[0] != 3 || ts[1].Shape()[0] != 2 {
		t.Fatalf("chunks %d", len(ts))
	}
	for i, tn := range ts {
		d, r := describe(t, tn)
		if got, want := uintptr(d.Data)+uintptr(d.ByteOffset), valuesAddr(c.Chunk(i), 0, 2); got != want {
			t.Errorf("chunk %d at %#x, want %#x", i, got, want)
		}
		r.ReleaseTensor()
		tn.Close()
	}

	bad := fromJSON(t, mem, arrow.PrimitiveTypes.Int16, "[null]")
	c2 := arrow.NewChunked(arrow.PrimitiveTypes.Int16, []arrow.Array{c.Chunk(0), bad})
	bad.Release()
	defer c2.Release()
	if _, err := dlarrow.FromChunked(c2); !errors.Is(err, dlarrow.ErrNulls) || !strings.Contains(err.Error(), "chunk 1") {
		t.Errorf("FromChunked with a null in chunk 1: %v", err)
	}
}

func TestCopyFromArray(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Float32, "[1, null, 3]")
	defer arr.Release()
	c, err := dlarrow.CopyFromArray[float32](arr, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Data; len(got) != 3 || got[0] != 1 || got[1] != -1 || got[2] != 3 {
		t.Errorf("CopyFromArray = %v, want [1 -1 3]", got)
	}
	bools := fromJSON(t, mem, arrow.FixedWidthTypes.Boolean, "[true, false, null, true]")
	defer bools.Release()
	bs, err := dlarrow.CopyFromArray(bools, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := bs.Data; len(got) != 4 || !got[0] || got[1] || got[2] || !got[3] {
		t.Errorf("CopyFromArray[bool] = %v", got)
	}
	if _, err := dlarrow.CopyFromArray[int32](arr, 0); !errors.Is(err, dlpack.ErrTypeMismatch) {
		t.Errorf("CopyFromArray[int32] of float32: %v", err)
	}
	str := fromJSON(t, mem, arrow.BinaryTypes.String, `["x"]`)
	defer str.Release()
	if _, err := dlarrow.CopyFromArray[uint8](str, 0); !errors.Is(err, dlarrow.ErrType) {
		t.Errorf("CopyFromArray of a string array: %v", err)
	}
}

// An Arrow tensor whose strides reach past its buffer is refused, not
// read past (arrow-go itself refuses short buffers when arrays are made).
func TestFromTensorOutsideBuffer(t *testing.T) {
	mem := checked(t)
	vals := fromJSON(t, mem, arrow.PrimitiveTypes.Float64, "[0, 1, 2, 3]")
	defer vals.Release()
	tt := tensor.NewFloat64(vals.Data(), []int64{3}, []int64{16}, nil)
	defer tt.Release()
	if _, err := dlarrow.FromTensor(tt); !errors.Is(err, dlarrow.ErrBuffer) {
		t.Errorf("FromTensor of 3 elements 16 bytes apart in 32 bytes: %v", err)
	}
	odd := tensor.NewFloat64(vals.Data(), []int64{2}, []int64{12}, nil)
	defer odd.Release()
	if _, err := dlarrow.FromTensor(odd); !errors.Is(err, dlpack.ErrStrides) {
		t.Errorf("FromTensor with a 12-byte stride of float64: %v", err)
	}
}
