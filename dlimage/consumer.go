package dlimage

import (
	"fmt"
	"image"
	"math"
	"runtime"

	"github.com/godlpack/dlpack"
)

// ToGray wraps a writable uint8 CPU tensor of shape (H, W), column stride 1
// and row stride >= W, as a *image.Gray of Rect (0, 0, W, H) sharing its
// memory. On success the image owns f: f is closed when the image becomes
// unreachable, so do not Close it yourself while the image is in use. It
// fails with dlpack.ErrShape for another rank, dlpack.ErrLayout for other
// strides (use CopyToGray), dlpack.ErrReadOnly for read-only tensors
// (including legacy ones imported without dlpack.AssumeWritable),
// dlpack.ErrTypeMismatch for other data types and dlpack.ErrDevice for
// memory the CPU cannot read; f stays the caller's on failure.
func ToGray(f dlpack.Foreign) (*image.Gray, error) {
	pix, h, w, stride, err := share(f, 1)
	if err != nil {
		return nil, err
	}
	m := &image.Gray{Pix: pix, Stride: stride, Rect: image.Rect(0, 0, w, h)}
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToAlpha is ToGray for *image.Alpha.
func ToAlpha(f dlpack.Foreign) (*image.Alpha, error) {
	pix, h, w, stride, err := share(f, 1)
	if err != nil {
		return nil, err
	}
	m := &image.Alpha{Pix: pix, Stride: stride, Rect: image.Rect(0, 0, w, h)}
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToRGBA wraps a writable uint8 CPU tensor of shape (H, W, 4), strides
// (row stride >= 4W, 4, 1), as a *image.RGBA sharing its memory; the
// samples are taken as alpha-premultiplied, as image.RGBA holds them. It
// fails and owns f as ToGray does; use CopyToRGBA for other layouts.
func ToRGBA(f dlpack.Foreign) (*image.RGBA, error) {
	pix, h, w, stride, err := share(f, 4)
	if err != nil {
		return nil, err
	}
	m := &image.RGBA{Pix: pix, Stride: stride, Rect: image.Rect(0, 0, w, h)}
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToNRGBA is ToRGBA for non-premultiplied samples (*image.NRGBA): what NumPy
// arrays from Pillow's "RGBA" mode hold.
func ToNRGBA(f dlpack.Foreign) (*image.NRGBA, error) {
	pix, h, w, stride, err := share(f, 4)
	if err != nil {
		return nil, err
	}
	m := &image.NRGBA{Pix: pix, Stride: stride, Rect: image.Rect(0, 0, w, h)}
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToCMYK is ToRGBA for *image.CMYK (channels C, M, Y, K).
func ToCMYK(f dlpack.Foreign) (*image.CMYK, error) {
	pix, h, w, stride, err := share(f, 4)
	if err != nil {
		return nil, err
	}
	m := &image.CMYK{Pix: pix, Stride: stride, Rect: image.Rect(0, 0, w, h)}
	keepUntilUnreachable(m, f)
	return m, nil
}

// keepUntilUnreachable closes f when the image m is collected.
func keepUntilUnreachable[T any](m *T, f dlpack.Foreign) {
	runtime.AddCleanup(m, func(f dlpack.Foreign) { f.Close() }, f)
}

// share checks that f is an (H, W) (channels 1) or (H, W, 4) tensor laid
// out as an image's Pix and returns its memory from the first to the last
// sample.
func share(f dlpack.Foreign, channels int) (pix []uint8, h, w, stride int, err error) {
	if f.Closed() {
		return nil, 0, 0, 0, dlpack.ErrClosed
	}
	if channels == 1 && f.NDim() != 2 {
		return nil, 0, 0, 0, fieldErr(dlpack.ErrShape, "dl_tensor.ndim", f.NDim(), "a one-channel image is (H, W); use CopyToGray for other shapes")
	}
	if channels == 4 && (f.NDim() != 3 || f.Dim(2) != 4) {
		return nil, 0, 0, 0, fieldErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "a four-channel image is (H, W, 4); use a Copy function for (H, W, 3) or (C, H, W)")
	}
	h64, w64 := f.Dim(0), f.Dim(1)
	rs, ps := f.Stride(0), f.Stride(1)
	if channels == 4 {
		if cs := f.Stride(2); cs != 1 {
			return nil, 0, 0, 0, fieldErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), "an image's channels are adjacent (stride 1); use a Copy function")
		}
	}
	if w64 > 1 && ps != int64(channels) {
		return nil, 0, 0, 0, fieldErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), fmt.Sprintf("an image's pixels are adjacent (stride %d); use a Copy function", channels))
	}
	row := w64 * int64(channels) // cannot overflow: Import checked the extent
	if h64 <= 1 {
		rs = row // any stride of a single row will do
	}
	if rs < row {
		return nil, 0, 0, 0, fieldErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), fmt.Sprintf("an image's row stride is at least the row's %d bytes; use a Copy function", row))
	}
	pix, err = dlpack.Span[uint8](f)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	return pix, int(h64), int(w64), int(rs), nil
}

// CopyToGray copies a uint8 CPU tensor of shape (H, W), or (H, W, 1) / (1,
// H, W) as layout says, with any strides, into a new *image.Gray. Read-only
// tensors are accepted; f stays the caller's to close.
func CopyToGray(f dlpack.Foreign, layout Layout) (*image.Gray, error) {
	h, w, c, err := copyShape(f, layout, 1)
	if err != nil {
		return nil, err
	}
	m := image.NewGray(image.Rect(0, 0, w, h))
	return m, copyInto(f, m.Pix, layout, h, w, c, 1)
}

// CopyToRGBA copies a uint8 CPU tensor with 3 or 4 channels, (H, W, C) or
// (C, H, W) as layout says, with any strides (read-only, transposed,
// negative), into a new *image.RGBA. Four channels are taken as
// alpha-premultiplied; three get an opaque alpha. f stays the caller's.
func CopyToRGBA(f dlpack.Foreign, layout Layout) (*image.RGBA, error) {
	h, w, c, err := copyShape(f, layout, 3, 4)
	if err != nil {
		return nil, err
	}
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	return m, copyInto(f, m.Pix, layout, h, w, c, 4)
}

// CopyToNRGBA is CopyToRGBA into a new *image.NRGBA (four channels taken as
// non-premultiplied).
func CopyToNRGBA(f dlpack.Foreign, layout Layout) (*image.NRGBA, error) {
	h, w, c, err := copyShape(f, layout, 3, 4)
	if err != nil {
		return nil, err
	}
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	return m, copyInto(f, m.Pix, layout, h, w, c, 4)
}

// copyShape reads H, W and C from f's shape; C must be one of channels (a
// 2-d tensor has one channel).
func copyShape(f dlpack.Foreign, layout Layout, channels ...int) (h, w, c int, err error) {
	if f.Closed() {
		return 0, 0, 0, dlpack.ErrClosed
	}
	switch {
	case f.NDim() == 2 && channels[0] == 1:
		h, w, c = int(f.Dim(0)), int(f.Dim(1)), 1
	case f.NDim() == 3 && layout == HWC:
		h, w, c = int(f.Dim(0)), int(f.Dim(1)), int(f.Dim(2))
	case f.NDim() == 3 && layout == CHW:
		c, h, w = int(f.Dim(0)), int(f.Dim(1)), int(f.Dim(2))
	case layout != HWC && layout != CHW:
		return 0, 0, 0, fieldErr(dlpack.ErrRequirement, "layout", layout, "HWC or CHW")
	default:
		return 0, 0, 0, fieldErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), fmt.Sprintf("not an image of %v channels in %v layout", channels, layout))
	}
	for _, want := range channels {
		if c != want {
			continue
		}
		// A broadcast (zero-stride) tensor can be larger than memory.
		if w > 0 && h > math.MaxInt/4/w {
			return 0, 0, 0, fieldErr(dlpack.ErrOverflow, "dl_tensor.shape", f.Shape(), "too many pixels for one image")
		}
		return h, w, c, nil
	}
	return 0, 0, 0, fieldErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), fmt.Sprintf("%d channels in %v layout, want %v", c, layout, channels))
}

// copyInto copies f's samples into dst, a compact image of h x w pixels of
// out channels; missing channels (alpha) are set to 255.
func copyInto(f dlpack.Foreign, dst []uint8, layout Layout, h, w, c, out int) error {
	if c < out {
		for i := out - 1; i < len(dst); i += out {
			dst[i] = 0xff
		}
	}
	src, err := dlpack.ReadOnlySpan[uint8](f)
	if err != nil {
		// Negative strides have no span: the strided view reads them.
		v, verr := dlpack.ViewOf[uint8](f)
		if verr != nil {
			return verr
		}
		hw := h * w
		for i, x := range v.All() {
			if layout == CHW {
				dst[(i%hw)*out+i/hw] = x
			} else {
				dst[(i/c)*out+i%c] = x
			}
		}
		return nil
	}
	var sy, sx, sc int // strides of row, pixel and channel, in bytes
	switch {
	case f.NDim() == 2:
		sy, sx = int(f.Stride(0)), int(f.Stride(1))
	case layout == CHW:
		sc, sy, sx = int(f.Stride(0)), int(f.Stride(1)), int(f.Stride(2))
	default:
		sy, sx, sc = int(f.Stride(0)), int(f.Stride(1)), int(f.Stride(2))
	}
	for y := 0; y < h; y++ {
		row := dst[y*w*out : (y+1)*w*out]
		if w > 0 && sx == c && (sc == 1 || c == 1) { // packed pixels: NumPy's (H, W, C) rows
			in := src[y*sy : y*sy+w*c]
			if c == out {
				copy(row, in)
				continue
			}
			for x := 0; x < w; x++ { // c == 3, out == 4
				p, q := in[x*3:x*3+3:x*3+3], row[x*4:x*4+3:x*4+3]
				q[0], q[1], q[2] = p[0], p[1], p[2]
			}
			continue
		}
		for x := 0; x < w; x++ {
			p, q := y*sy+x*sx, x*out
			for ch := 0; ch < c; ch++ {
				row[q+ch] = src[p+ch*sc]
			}
		}
	}
	return nil
}
