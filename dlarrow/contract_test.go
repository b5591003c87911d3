package dlarrow_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

// TestNilArguments: every constructor given nil, or a typed nil Arrow
// value, returns an error wrapping dlpack.ErrNilPointer instead of
// panicking, and so do the consumers of a nil *Tensor.
func TestNilArguments(t *testing.T) {
	tensorField := arrow.Field{Name: "t", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32),
		Metadata: arrow.NewMetadata([]string{"ARROW:extension:name", "ARROW:extension:metadata"},
			[]string{"arrow.fixed_shape_tensor", `{"shape":[2,2]}`})}
	calls := []struct {
		name string
		call func() error
	}{
		{"FromArray(nil)", func() error { _, err := dlarrow.FromArray(nil); return err }},
		{"FromArray(typed nil)", func() error { _, err := dlarrow.FromArray((*array.Float32)(nil)); return err }},
		{"FromField(nil)", func() error { _, err := dlarrow.FromField(arrow.Field{Name: "x"}, nil); return err }},
		{"FromField(extension, typed nil)", func() error { _, err := dlarrow.FromField(tensorField, (*array.FixedSizeList)(nil)); return err }},
		{"FromChunked(nil)", func() error { _, err := dlarrow.FromChunked(nil); return err }},
		{"FromTensor(nil)", func() error { _, err := dlarrow.FromTensor(nil); return err }},
		{"FromTensor(typed nil)", func() error { _, err := dlarrow.FromTensor((*tensor.Float32)(nil)); return err }},
		{"CopyFromArray(nil)", func() error { _, err := dlarrow.CopyFromArray[float32](nil, 0); return err }},
		{"From(nil *Tensor)", func() error { _, err := dlpack.From((*dlarrow.Tensor)(nil)); return err }},
		{"Produce(nil *Tensor)", func() error { _, err := dlpack.Produce((*dlarrow.Tensor)(nil), dlpack.Request{}); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.ErrorIs(t, err, dlpack.ErrNilPointer)
		})
	}
	assert.Zero(t, dlpack.Outstanding())
}
