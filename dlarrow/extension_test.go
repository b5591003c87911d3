package dlarrow_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/godlpack/dlpack/dlarrow"
)

func tensorField(meta string) arrow.Field {
	md := arrow.NewMetadata([]string{"ARROW:extension:name", "ARROW:extension:metadata"}, []string{dlarrow.FixedShapeTensorName, meta})
	return arrow.Field{Name: "t", Type: arrow.FixedSizeListOf(6, arrow.PrimitiveTypes.Float32), Metadata: md}
}

// Arrow's canonical fixed_shape_tensor, read as pyarrow reads it: the
// metadata's shape is physical, the permutation orders the logical
// dimensions.
func TestFromFieldFixedShapeTensor(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.FixedSizeListOf(6, arrow.PrimitiveTypes.Float32), "[[0,1,2,3,4,5],[6,7,8,9,10,11]]")
	defer arr.Release()
	cases := []struct {
		meta           string
		shape, strides []int64
	}{
		{`{"shape":[2,3]}`, []int64{2, 2, 3}, nil},
		{`{"shape":[2,3],"permutation":[0,1]}`, []int64{2, 2, 3}, nil},
		{`{"shape":[2,3],"permutation":[1,0]}`, []int64{2, 3, 2}, []int64{6, 1, 3}},
		{`{"shape":[1,2,3],"permutation":[2,0,1],"dim_names":["z","x","y"]}`, []int64{2, 3, 1, 2}, []int64{6, 1, 6, 3}},
	}
	for _, c := range cases {
		tn, err := dlarrow.FromField(tensorField(c.meta), arr)
		if err != nil {
			t.Fatalf("%s: %v", c.meta, err)
		}
		d, r := describe(t, tn)
		if !slices.Equal(d.Shape, c.shape) || !slices.Equal(d.Strides, c.strides) {
			t.Errorf("%s: shape %v strides %v, want %v %v", c.meta, d.Shape, d.Strides, c.shape, c.strides)
		}
		r.ReleaseTensor()
		tn.Close()
	}
	for _, bad := range []string{`{"shape":[4]}`, `{"shape":[2,3],"permutation":[0,0]}`, `{"shape":[2,3],"permutation":[0]}`, `{"shape":[-2,-3]}`, `not json`,
		`{"shape":[9,6148914691236517206]}`} { // the last one's product wraps to 6 in int64 {
		if _, err := dlarrow.FromField(tensorField(bad), arr); !errors.Is(err, dlarrow.ErrType) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	other := arrow.Field{Name: "u", Type: arr.DataType(), Metadata: arrow.NewMetadata([]string{"ARROW:extension:name"}, []string{"arrow.uuid"})}
	if _, err := dlarrow.FromField(other, arr); !errors.Is(err, dlarrow.ErrType) {
		t.Errorf("another extension: %v", err)
	}
	plain, err := dlarrow.FromField(arrow.Field{Name: "p", Type: arr.DataType()}, arr)
	if err != nil || !slices.Equal(plain.Shape(), []int64{2, 6}) {
		t.Errorf("no extension: %v %v", plain, err)
	}
	plain.Close()
}
