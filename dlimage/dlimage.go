// Package dlimage exchanges the standard library's images (package image)
// as DLPack tensors, without copying whenever DLPack can describe the
// pixels as they lie in memory.
//
// Out of Go (producer.go): Pixels gives the tensor of an 8-bit image's
// Pix slice, Planes the three tensors of a *image.YCbCr. A *Tensor
// implements dlpack.Source and dlpack.Producer, so dlpack.Produce,
// dlpack.From and the pycapsule helpers take it as it is. The shapes are
// row-major, height first, as NumPy and Pillow write them:
//
//	*image.Gray, *image.Alpha           (H, W)     uint8, strides (Stride, 1)
//	*image.Paletted                     (H, W)     uint8 palette indices (Palette copies the colours)
//	*image.RGBA, *image.NRGBA           (H, W, 4)  uint8, strides (Stride, 4, 1)
//	*image.CMYK                         (H, W, 4)  uint8, strides (Stride, 4, 1)
//	*image.YCbCr (Planes)               Y (H, W); Cb, Cr (CH, CW) at the chroma resolution
//	*image.Gray16                       CopyGray16:  (H, W)    uint16 copy, native byte order
//	*image.RGBA64, *image.NRGBA64       CopyRGBA64, CopyNRGBA64: (H, W, 4) uint16 copy
//
// A sub-image (SubImage) is exported through the data pointer and the row
// stride of its parent: never a copy. The 16-bit types keep big-endian
// bytes in Pix, which DLPack cannot describe; Pixels refuses them
// (ErrBigEndian) and the Copy functions convert them, explicitly.
//
// Into Go (consumer.go): Gray, Alpha, RGBA, NRGBA and CMYK wrap a writable
// uint8 CPU tensor of shape (H, W) or (H, W, 4) whose inner strides are
// packed (1, or 4 and 1) and whose row stride is at least the row's bytes.
// The image shares the tensor's memory and takes the tensor over: it is
// released when the image becomes unreachable, so do not Close the
// Foreign while the image is in use (as package dlgonum does for
// matrices), and give them owned imports (Import, From), not the scoped
// Foreign of a Borrow. Read-only tensors are refused with dlpack.ErrReadOnly rather
// than made writable. Other layouts, (H, W, 3), channel-first (C, H, W) or
// any strides, go through CopyGray, CopyRGBA and CopyNRGBA, which leave the
// Foreign to the caller.
package dlimage

import (
	"errors"
	"strconv"

	"github.com/godlpack/dlpack"
)

// Sentinel errors, for errors.Is. Errors about a tensor's fields are
// *dlpack.FieldError values wrapping the root package's sentinels
// (dlpack.ErrShape, dlpack.ErrLayout, dlpack.ErrReadOnly, ...).
var (
	// ErrBigEndian: the image holds 16-bit big-endian samples, which a
	// DLPack tensor cannot describe; CopyGray16, CopyRGBA64 and
	// CopyNRGBA64 convert them to native uint16.
	ErrBigEndian = errors.New("dlimage: 16-bit samples are big-endian, which DLPack cannot describe")
	// ErrUnsupported: the image type has no tensor layout here.
	ErrUnsupported = errors.New("dlimage: unsupported image type")
	// ErrMalformed: an image's fields contradict each other (a Pix slice
	// too short for its Rect and Stride, a negative stride, rows that
	// overlap). The image package's own constructors never make such
	// images.
	ErrMalformed = errors.New("dlimage: malformed image")
)

// Layout says how the dimensions of a tensor given to a Copy function are
// ordered.
type Layout uint8

const (
	// HWC is (height, width, channels): NumPy's and Pillow's order.
	HWC Layout = iota
	// CHW is (channels, height, width): PyTorch's order.
	CHW
)

// String returns "HWC" or "CHW".
func (l Layout) String() string {
	switch l {
	case HWC:
		return "HWC"
	case CHW:
		return "CHW"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

func fieldErr(sentinel error, field string, value any, why string) error {
	return &dlpack.FieldError{Field: field, Value: value, Err: sentinel, Why: why}
}
