package dlimage

import (
	"fmt"
	"image"
	"image/color"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// Tensor is a tensor of 8-bit samples lying in a Go byte slice: the pixels
// of an image, or one plane of a *image.YCbCr. It is plain data, like the
// image types: element (i, j, k) is Pix[Offset + i*Strides[0] + j*Strides[1]
// + k*Strides[2]], and Shape and Strides have one entry per dimension.
//
// Tensor implements dlpack.Source and dlpack.Producer: dlpack.Produce and
// DLPack lend the memory without copying (unless the request asks for a
// copy), and dlpack.From hands it to a Go consumer. The tensor itself is
// the description's Owner: it, its Image and its Pix stay reachable until
// the last consumer releases the tensor, whatever happens to the image's
// fields meanwhile. Consumers may write through the tensor, so writes show
// in the image unless ReadOnly is set. The fields are read at each export;
// changing them later does not change tensors already handed out.
type Tensor struct {
	Image    image.Image // the image the samples belong to
	Pix      []uint8     // the image's Pix slice, or one YCbCr plane
	Offset   int         // index in Pix of the first element (index 0 in every dimension)
	Shape    []int64     // (H, W) or (H, W, 4)
	Strides  []int64     // in elements (bytes): (Stride, 1) or (Stride, 4, 1)
	ReadOnly bool        // consumers get a read-only tensor (or a copy, as dlpack.Produce rules)
}

// DescribeTensor implements dlpack.Source: uint8 CPU memory from Pix, with
// Offset as the byte offset and ReadOnly as given. It fails with ErrMalformed if any element
// lies outside Pix.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	numel, err := t.check()
	if err != nil {
		return err
	}
	dlpack.DescribeSlice(d, t.Pix)
	d.Shape, d.Strides, d.ReadOnly = t.Shape, t.Strides, t.ReadOnly
	if numel > 0 {
		d.ByteOffset = uint64(t.Offset)
	}
	d.Device = dlpack.CPUDevice
	d.Owner = t
	return nil
}

// DLPackDevice implements dlpack.Producer: image memory is on the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer with dlpack.Produce.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(t, req) }

// check verifies that every element lies inside Pix and returns the
// number of elements.
func (t *Tensor) check() (int64, error) {
	if len(t.Shape) != len(t.Strides) {
		return 0, fieldErr(ErrMalformed, "Strides", t.Strides, fmt.Sprintf("%d strides for %d dimensions", len(t.Strides), len(t.Shape)))
	}
	numel := int64(1)
	for i, n := range t.Shape {
		if n < 0 {
			return 0, fieldErr(ErrMalformed, fmt.Sprintf("Shape[%d]", i), n, "negative dimension")
		}
		if t.Strides[i] < 0 {
			return 0, fieldErr(ErrMalformed, fmt.Sprintf("Strides[%d]", i), t.Strides[i], "negative stride")
		}
		if n == 0 {
			numel = 0
		}
	}
	if numel == 0 {
		return 0, nil
	}
	if t.Offset < 0 || t.Offset >= len(t.Pix) {
		return 0, fieldErr(ErrMalformed, "Offset", t.Offset, fmt.Sprintf("outside Pix (%d bytes)", len(t.Pix)))
	}
	// The last element, Offset + sum((Shape[i]-1)*Strides[i]), must lie in
	// Pix; each term is bounded by len(Pix) first, so nothing overflows.
	room := int64(len(t.Pix) - 1 - t.Offset)
	for i, n := range t.Shape {
		numel *= n
		if n == 1 || t.Strides[i] == 0 {
			continue
		}
		if t.Strides[i] > room/(n-1) {
			return 0, fieldErr(ErrMalformed, "Pix", len(t.Pix), fmt.Sprintf("too short for shape %v, strides %v, offset %d", t.Shape, t.Strides, t.Offset))
		}
		room -= (n - 1) * t.Strides[i]
	}
	return numel, nil
}

// FromImage returns the zero-copy tensor of an 8-bit image's samples (see the
// package documentation for the shape of each type). The tensor shares
// img's memory: a sub-image is described through its offset into Pix and
// its parent's row stride. It fails with ErrBigEndian for the 16-bit
// types (use CopyFromGray16, CopyFromRGBA64 or CopyFromNRGBA64), ErrUnsupported for
// *image.YCbCr (use FromYCbCr) and every other type, ErrMalformed for an
// image whose Pix cannot hold its Rect, and dlpack.ErrNilPointer for nil
// or a nil pointer (as do FromYCbCr and the Copy functions).
func FromImage(img image.Image) (*Tensor, error) {
	if nilcheck.IsNil(img) {
		return nil, fieldErr(dlpack.ErrNilPointer, "image", fmt.Sprintf("%T", img), "nil image")
	}
	switch m := img.(type) {
	case *image.Gray:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 1, m.PixOffset)
		}
	case *image.Alpha:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 1, m.PixOffset)
		}
	case *image.Paletted:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 1, m.PixOffset)
		}
	case *image.RGBA:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 4, m.PixOffset)
		}
	case *image.NRGBA:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 4, m.PixOffset)
		}
	case *image.CMYK:
		if m != nil {
			return newTensor(img, m.Pix, m.Stride, m.Rect, 4, m.PixOffset)
		}
	case *image.Gray16, *image.RGBA64, *image.NRGBA64:
		return nil, fieldErr(ErrBigEndian, "image", fmt.Sprintf("%T", img), "copy it with CopyFromGray16, CopyFromRGBA64 or CopyFromNRGBA64")
	case *image.YCbCr:
		return nil, fieldErr(ErrUnsupported, "image", fmt.Sprintf("%T", img), "its planes are separate tensors: use FromYCbCr")
	default:
		return nil, fieldErr(ErrUnsupported, "image", fmt.Sprintf("%T", img), "no tensor layout for this type")
	}
	return nil, fieldErr(dlpack.ErrNilPointer, "image", fmt.Sprintf("%T", img), "nil image")
}

// newTensor describes the samples of rectangle r of an image whose pixel
// (x, y) starts at Pix[offset(x, y)], channels bytes per pixel.
func newTensor(img image.Image, pix []uint8, stride int, r image.Rectangle, channels int, offset func(x, y int) int) (*Tensor, error) {
	h, w, off := max(r.Dy(), 0), max(r.Dx(), 0), 0
	if !r.Empty() {
		off = offset(r.Min.X, r.Min.Y)
	}
	return plane(img, pix, stride, h, w, channels, off)
}

func plane(img image.Image, pix []uint8, stride, h, w, channels, off int) (*Tensor, error) {
	if h > 1 && stride < w*channels {
		return nil, fieldErr(ErrMalformed, "Stride", stride, fmt.Sprintf("rows of %d pixels x %d bytes overlap", w, channels))
	}
	t := &Tensor{Image: img, Pix: pix, Offset: off}
	if channels == 1 {
		t.Shape, t.Strides = []int64{int64(h), int64(w)}, []int64{int64(stride), 1}
	} else {
		t.Shape, t.Strides = []int64{int64(h), int64(w), int64(channels)}, []int64{int64(stride), int64(channels), 1}
	}
	if _, err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

// FromYCbCr returns the three zero-copy tensors of a *image.YCbCr: Y of shape
// (H, W) with strides (YStride, 1), and Cb and Cr of shape (CH, CW) with
// strides (CStride, 1), where CH and CW count the chroma samples that cover
// the image's Rect at its SubsampleRatio, as the image package computes
// them: for 4:2:0, CW = (Max.X+1)/2 - Min.X/2 and CH = (Max.Y+1)/2 -
// Min.Y/2; 4:2:2 halves only the width, 4:4:0 only the height, 4:1:1
// quarters the width, 4:1:0 quarters the width and halves the height, 4:4:4
// keeps both. Chroma sample (i, j) belongs to the luma pixels (x, y) whose
// COffset(x, y) is i*CStride + j: nothing is upsampled. For an
// *image.NYCbCrA, FromYCbCr(&img.YCbCr) gives its colour planes.
func FromYCbCr(img *image.YCbCr) (y, cb, cr *Tensor, err error) {
	if img == nil {
		return nil, nil, nil, fieldErr(dlpack.ErrNilPointer, "image", "*image.YCbCr", "nil image")
	}
	r := img.Rect
	var h, w, ch, cw, yOff, cOff int
	if !r.Empty() {
		w, h, cw, ch = yCbCrSize(r, img.SubsampleRatio)
		yOff, cOff = img.YOffset(r.Min.X, r.Min.Y), img.COffset(r.Min.X, r.Min.Y)
	}
	if y, err = plane(img, img.Y, img.YStride, h, w, 1, yOff); err != nil {
		return nil, nil, nil, err
	}
	if cb, err = plane(img, img.Cb, img.CStride, ch, cw, 1, cOff); err != nil {
		return nil, nil, nil, err
	}
	if cr, err = plane(img, img.Cr, img.CStride, ch, cw, 1, cOff); err != nil {
		return nil, nil, nil, err
	}
	return y, cb, cr, nil
}

// yCbCrSize is the image package's (unexported) chroma size rule.
func yCbCrSize(r image.Rectangle, ratio image.YCbCrSubsampleRatio) (w, h, cw, ch int) {
	w, h = r.Dx(), r.Dy()
	switch ratio {
	case image.YCbCrSubsampleRatio422:
		cw, ch = (r.Max.X+1)/2-r.Min.X/2, h
	case image.YCbCrSubsampleRatio420:
		cw, ch = (r.Max.X+1)/2-r.Min.X/2, (r.Max.Y+1)/2-r.Min.Y/2
	case image.YCbCrSubsampleRatio440:
		cw, ch = w, (r.Max.Y+1)/2-r.Min.Y/2
	case image.YCbCrSubsampleRatio411:
		cw, ch = (r.Max.X+3)/4-r.Min.X/4, h
	case image.YCbCrSubsampleRatio410:
		cw, ch = (r.Max.X+3)/4-r.Min.X/4, (r.Max.Y+1)/2-r.Min.Y/2
	default:
		cw, ch = w, h
	}
	return w, h, cw, ch
}

// CopyFromPalette returns a copy of a palette as an (N, 4) uint8 array of
// non-premultiplied RGBA colours (color.NRGBAModel), row i being the colour
// of index i: what the indices from FromImage of an *image.Paletted refer to.
func CopyFromPalette(p color.Palette) *dlpack.Array[uint8] {
	data := dlpack.AlignedSlice[uint8](4 * len(p))
	for i, c := range p {
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = n.R, n.G, n.B, n.A
	}
	return dlpack.NewArray(data, []int64{int64(len(p)), 4})
}

// CopyFromGray16 copies a 16-bit gray image into a new (H, W) uint16 array in
// native byte order (the image keeps big-endian bytes, which DLPack cannot
// describe). The array's memory is 256-byte aligned and owned by Go; it
// shares nothing with img. It fails with ErrMalformed for an image whose
// Pix cannot hold its Rect.
func CopyFromGray16(img *image.Gray16) (*dlpack.Array[uint16], error) {
	if img == nil {
		return nil, fieldErr(dlpack.ErrNilPointer, "image", "*image.Gray16", "nil image")
	}
	return copy16(img, img.Pix, img.Stride, img.Rect, 1, img.PixOffset)
}

// CopyFromRGBA64 is CopyFromGray16 for *image.RGBA64: a new (H, W, 4) uint16 array
// of alpha-premultiplied samples, as the image holds them.
func CopyFromRGBA64(img *image.RGBA64) (*dlpack.Array[uint16], error) {
	if img == nil {
		return nil, fieldErr(dlpack.ErrNilPointer, "image", "*image.RGBA64", "nil image")
	}
	return copy16(img, img.Pix, img.Stride, img.Rect, 4, img.PixOffset)
}

// CopyFromNRGBA64 is CopyFromGray16 for *image.NRGBA64: a new (H, W, 4) uint16
// array of non-premultiplied samples.
func CopyFromNRGBA64(img *image.NRGBA64) (*dlpack.Array[uint16], error) {
	if img == nil {
		return nil, fieldErr(dlpack.ErrNilPointer, "image", "*image.NRGBA64", "nil image")
	}
	return copy16(img, img.Pix, img.Stride, img.Rect, 4, img.PixOffset)
}

func copy16(img image.Image, pix []uint8, stride int, r image.Rectangle, channels int, offset func(x, y int) int) (*dlpack.Array[uint16], error) {
	// The byte layout is checked as a tensor of (H, W, 2*channels) bytes.
	t, err := newTensor(img, pix, stride, r, 2*channels, offset)
	if err != nil {
		return nil, err
	}
	h, w := int(t.Shape[0]), int(t.Shape[1])
	row := w * channels
	data := dlpack.AlignedSlice[uint16](h * row)
	for y := 0; y < h; y++ {
		src := pix[t.Offset+y*stride : t.Offset+y*stride+2*row]
		dst := data[y*row : (y+1)*row]
		for i := range dst {
			dst[i] = uint16(src[2*i])<<8 | uint16(src[2*i+1])
		}
	}
	if channels == 1 {
		return dlpack.NewArray(data, []int64{int64(h), int64(w)}), nil
	}
	return dlpack.NewArray(data, []int64{int64(h), int64(w), int64(channels)}), nil
}
