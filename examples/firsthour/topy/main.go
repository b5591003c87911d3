// Command topy is a c-shared library for Python: an image (dlimage) and a
// gonum matrix (dlgonum) handed to NumPy through the loader that
// cmd/dlpack-python writes (topy.py).
package main

//go:generate go tool dlpack-python -name topy

// #include <stdint.h>
import "C"

import (
	"image"
	"image/color"

	"github.com/godlpack/dlpack/dlgonum"
	"github.com/godlpack/dlpack/dlimage"
	"github.com/godlpack/dlpack/pycapsule"
	"gonum.org/v1/gonum/mat"
)

//export topy_image
func topy_image() C.int64_t {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for y := 0; y < 2; y++ {
		for x := 0; x < 3; x++ {
			img.SetRGBA(x, y, color.RGBA{R: uint8(10*y + x), G: 100, B: 200, A: 255})
		}
	}
	t, err := dlimage.FromImage(img)
	if err != nil {
		pycapsule.Raise(err) // a Python exception for the loader to raise
		return 0
	}
	return C.int64_t(topyRegister(t))
}

//export topy_matrix
func topy_matrix() C.int64_t {
	m := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	return C.int64_t(topyRegister(dlgonum.FromDense(m)))
}

func main() {}
