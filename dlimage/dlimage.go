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
	// DLPack tensor cannot describe; CopyFromGray16, CopyFromRGBA64 and
	// CopyFromNRGBA64 convert them to native uint16.
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
