package dlimage_test

import (
	"fmt"
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
)

// TestNilImages: every constructor given nil, or a typed nil image of
// any type it names, returns an error wrapping dlpack.ErrNilPointer
// instead of panicking, and so do the consumers of a nil *Tensor.
func TestNilImages(t *testing.T) {
	calls := []struct {
		name string
		call func() error
	}{
		{"FromImage(nil)", func() error { _, err := dlimage.FromImage(nil); return err }},
		{"FromYCbCr(nil)", func() error { _, _, _, err := dlimage.FromYCbCr(nil); return err }},
		{"CopyFromGray16(nil)", func() error { _, err := dlimage.CopyFromGray16(nil); return err }},
		{"CopyFromRGBA64(nil)", func() error { _, err := dlimage.CopyFromRGBA64(nil); return err }},
		{"CopyNRGBA64(nil)", func() error { _, err := dlimage.CopyFromNRGBA64(nil); return err }},
		{"From(nil *Tensor)", func() error { _, err := dlpack.From((*dlimage.Tensor)(nil)); return err }},
		{"Produce(nil *Tensor)", func() error { _, err := dlpack.Produce((*dlimage.Tensor)(nil), dlpack.Request{}); return err }},
	}
	for _, img := range []image.Image{(*image.Gray)(nil), (*image.Alpha)(nil), (*image.Paletted)(nil), (*image.RGBA)(nil),
		(*image.NRGBA)(nil), (*image.CMYK)(nil), (*image.Gray16)(nil), (*image.RGBA64)(nil), (*image.NRGBA64)(nil), (*image.YCbCr)(nil)} {
		calls = append(calls, struct {
			name string
			call func() error
		}{fmt.Sprintf("FromImage(%T)", img), func() error { _, err := dlimage.FromImage(img); return err }})
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
