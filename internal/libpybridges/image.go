package main

// The images of package dlimage: PNG files decoded and encoded by Go's
// image/png, exchanged with Python through DLPack (examples/png/goimage.py;
// the tests compare them with Pillow).

// #include <stdint.h>
import "C"

import (
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
	"github.com/godlpack/dlpack/pycapsule"
)

// imageOf returns the image of id, nil if there is none.
func imageOf(id C.int64_t) image.Image {
	img, _ := lookup[image.Image](id)
	return img
}

// dlimage_load decodes the PNG file at path with image/png and returns
// the image's id, or -1 with a ValueError set.
//
//export dlimage_load
func dlimage_load(path *C.char) C.int64_t {
	file, err := os.Open(C.GoString(path))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	defer file.Close()
	img, err := png.Decode(file)
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	return register(img)
}

// dlimage_sub registers img.SubImage(x0, y0, x1, y1), which shares the
// image's pixels, and returns its id, or -1 with a ValueError set.
//
//export dlimage_sub
func dlimage_sub(id C.int64_t, x0, y0, x1, y1 C.int) C.int64_t {
	img, ok := imageOf(id).(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		pycapsule.SetError(false, "goimage: no such image, or it has no SubImage")
		return -1
	}
	return register(img.SubImage(image.Rect(int(x0), int(y0), int(x1), int(y1))))
}

// dlimage_type writes the Go type of the image (such as "*image.NRGBA")
// into buf (NUL-terminated, at most n bytes with the NUL).
//
//export dlimage_type
func dlimage_type(id C.int64_t, buf *C.char, n C.int) {
	s := fmt.Sprintf("%T", imageOf(id))
	if len(s) >= int(n) {
		s = s[:n-1]
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	copy(out, s)
	out[len(s)] = 0
}

// dlimage_pixel_addr returns the address of the image's first sample
// (pixel Rect.Min), 0 if it has none: what a zero-copy consumer sees.
//
//export dlimage_pixel_addr
func dlimage_pixel_addr(id C.int64_t) C.uintptr_t {
	t, err := dlimage.FromImage(imageOf(id))
	if err != nil || len(t.Pix) == 0 {
		return 0
	}
	return C.uintptr_t(uintptr(unsafe.Pointer(&t.Pix[t.Offset])))
}

// What dlimage_dlpack exports.
const (
	whatPixels  = 0 // dlimage.FromImage: zero copy, 8-bit types only
	whatCopy16  = 1 // dlimage.CopyFromGray16, CopyFromRGBA64, CopyFromNRGBA64
	whatPalette = 2 // dlimage.CopyFromPalette of a *image.Paletted
	whatY       = 3 // dlimage.FromYCbCr of a *image.YCbCr
	whatCb      = 4
	whatCr      = 5
)

func producer(img image.Image, what int) (dlpack.Producer, error) {
	switch what {
	case whatPixels:
		return dlimage.FromImage(img)
	case whatCopy16:
		switch m := img.(type) {
		case *image.Gray16:
			return dlimage.CopyFromGray16(m)
		case *image.RGBA64:
			return dlimage.CopyFromRGBA64(m)
		case *image.NRGBA64:
			return dlimage.CopyFromNRGBA64(m)
		}
		return nil, fmt.Errorf("goimage: %T is not a 16-bit image", img)
	case whatPalette:
		if m, ok := img.(*image.Paletted); ok {
			return dlimage.CopyFromPalette(m.Palette), nil
		}
		return nil, fmt.Errorf("goimage: %T has no palette", img)
	case whatY, whatCb, whatCr:
		m, ok := img.(*image.YCbCr)
		if !ok {
			return nil, fmt.Errorf("goimage: %T has no YCbCr planes", img)
		}
		y, cb, cr, err := dlimage.FromYCbCr(m)
		return []dlpack.Producer{y, cb, cr}[what-whatY], err
	}
	return nil, fmt.Errorf("goimage: unknown export %d", what)
}

// dlimage_dlpack implements __dlpack__ for one export of an image: the
// four arguments are the Python objects __dlpack__ received (borrowed),
// read by pycapsule.DLPack as the array API rules. It returns a new
// capsule reference, or 0 with the exception set.
//
//export dlimage_dlpack
func dlimage_dlpack(id C.int64_t, what C.int, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	img := imageOf(id)
	if img == nil {
		pycapsule.SetError(true, "goimage: image was freed")
		return 0
	}
	p, err := producer(img, int(what))
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(p, uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// How dlimage_encode reads the tensor.
const (
	asGray     = 0 // dlimage.ToGray: zero copy
	asNRGBA    = 1 // dlimage.ToNRGBA: zero copy
	asRGBA     = 2 // dlimage.ToRGBA: zero copy
	asCopyHWC  = 3 // dlimage.CopyToNRGBA(f, HWC)
	asCopyCHW  = 4 // dlimage.CopyToNRGBA(f, CHW)
	asCopyGray = 5 // dlimage.CopyToGray(f, HWC)
)

// dlimage_encode consumes a DLPack capsule (borrowed reference), reads its
// tensor as an image (as says how) and writes it to path with image/png.
// With the zero-copy ways the image takes the tensor over and releases it
// when Go collects the image; with the copies the tensor is released at
// once. Returns 0, or -1 with a Python exception set (ValueError for a
// capsule that cannot be consumed, BufferError for a tensor refused).
//
//export dlimage_encode
func dlimage_encode(capsule C.uintptr_t, as C.int, path *C.char) C.int {
	ptr, versioned, err := pycapsule.Consume(uintptr(capsule))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	var f dlpack.Foreign
	if versioned {
		f, err = dlpack.Import(ptr)
	} else {
		f, err = dlpack.ImportLegacy(ptr, dlpack.AssumeWritable()) // NumPy's legacy capsules of writable arrays
	}
	if err != nil { // Import released the tensor
		pycapsule.SetError(true, err.Error())
		return -1
	}
	var img image.Image
	switch as {
	case asGray:
		img, err = dlimage.ToGray(f)
	case asNRGBA:
		img, err = dlimage.ToNRGBA(f)
	case asRGBA:
		img, err = dlimage.ToRGBA(f)
	case asCopyHWC, asCopyCHW, asCopyGray:
		switch as {
		case asCopyHWC:
			img, err = dlimage.CopyToNRGBA(f, dlimage.HWC)
		case asCopyCHW:
			img, err = dlimage.CopyToNRGBA(f, dlimage.CHW)
		default:
			img, err = dlimage.CopyToGray(f, dlimage.HWC)
		}
		f.Close()
	default:
		err = errors.New("goimage: unknown reading")
	}
	if err != nil {
		f.Close() // refused: the tensor is still ours (a no-op after a copy's Close)
		pycapsule.SetError(true, err.Error())
		return -1
	}
	out, err := os.Create(C.GoString(path))
	if err == nil {
		err = png.Encode(out, img)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	return 0
}
