//go:build cgo

package dlimage_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"runtime"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
)

// Decode a PNG, lend its pixels as a tensor without copying, and take a
// tensor back as an image. Here the consumer is Go (dlpack.From); a C or
// Python consumer gets the same tensor through dlpack.Produce.
func ExampleFromImage() {
	src := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	src.SetNRGBA(2, 1, color.NRGBA{R: 10, G: 20, B: 30, A: 255})
	var file bytes.Buffer
	if err := png.Encode(&file, src); err != nil {
		panic(err)
	}
	img, err := png.Decode(&file)
	if err != nil {
		panic(err)
	}

	t, err := dlimage.FromImage(img) // the decoded image's Pix, shared
	if err != nil {
		panic(err)
	}
	f, err := dlpack.From(t)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%T: shape %v, strides %v, %v\n", img, f.Shape(), f.Strides(), f.DataType())

	back, err := dlimage.ToNRGBA(f) // back owns f: released when back is collected
	if err != nil {
		panic(err)
	}
	fmt.Println(back.NRGBAAt(2, 1))
	runtime.KeepAlive(back)

	_, err = dlimage.FromImage(image.NewGray16(image.Rect(0, 0, 1, 1)))
	fmt.Println(err)
	// Output:
	// *image.NRGBA: shape [2 3 4], strides [12 4 1], uint8
	// {10 20 30 255}
	// dlimage: 16-bit samples are big-endian, which DLPack cannot describe: image = *image.Gray16 (copy it with CopyFromGray16, CopyFromRGBA64 or CopyFromNRGBA64)
}
