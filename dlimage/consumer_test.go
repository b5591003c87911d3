//go:build cgo

package dlimage_test

import (
	"image"
	"image/color"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cBytes makes a uint8 tensor in C memory (a foreign producer) holding
// 0, 1, 2, ... with the given shape and strides.
func cBytes(shape, strides []int64, n int) cshim.Tensor {
	return cshim.Make(cBytesSpec(shape, strides, n))
}

func cBytesSpec(shape, strides []int64, n int) cshim.Spec {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	return cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: int32(len(shape)), Code: 1, Bits: 8, Lanes: 1,
		Shape: shape, Strides: strides, Data: data}
}

// A (H, W) tensor with padded rows becomes a Gray image on the tensor's
// memory; a write to the image is a write to the producer's memory.
func TestGrayShares(t *testing.T) {
	ct := cBytes([]int64{3, 5}, []int64{8, 1}, 24)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	g, err := dlimage.ToGray(f)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 5, 3), g.Rect)
	assert.Equal(t, 8, g.Stride)
	assert.Equal(t, f.DataAddr()+uintptr(f.ByteOffset()), uintptr(unsafe.Pointer(&g.Pix[0])))
	for y := 0; y < 3; y++ {
		for x := 0; x < 5; x++ {
			assert.Equal(t, uint8(8*y+x), g.GrayAt(x, y).Y)
		}
	}
	g.SetGray(4, 2, color.Gray{Y: 200})
	v, err := dlpack.ViewOf[uint8](f)
	require.NoError(t, err)
	got, _ := v.At(2, 4)
	assert.Equal(t, uint8(200), got)
	runtime.KeepAlive(g)
}

// Every four-channel type and Alpha share memory the same way; a size-1
// dimension may have any stride.
func TestFourChannelsShare(t *testing.T) {
	ct := cBytes([]int64{2, 3, 4}, []int64{16, 4, 1}, 32)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	rgba, err := dlimage.ToRGBA(f)
	require.NoError(t, err)
	assert.Equal(t, color.RGBA{16 + 4, 16 + 5, 16 + 6, 16 + 7}, rgba.RGBAAt(1, 1))

	for _, wrap := range []func(dlpack.Foreign) (image.Image, error){
		func(f dlpack.Foreign) (image.Image, error) { return dlimage.ToNRGBA(f) },
		func(f dlpack.Foreign) (image.Image, error) { return dlimage.ToCMYK(f) },
	} {
		ct := cBytes([]int64{1, 3, 4}, []int64{99, 4, 1}, 12) // one row: any row stride
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		img, err := wrap(f)
		require.NoError(t, err)
		assert.Equal(t, image.Rect(0, 0, 3, 1), img.Bounds())
		switch m := img.(type) {
		case *image.NRGBA:
			assert.Equal(t, color.NRGBA{8, 9, 10, 11}, m.NRGBAAt(2, 0))
		case *image.CMYK:
			assert.Equal(t, color.CMYK{8, 9, 10, 11}, m.CMYKAt(2, 0))
		}
		runtime.KeepAlive(img)
	}
	ca := cBytes([]int64{2, 2}, []int64{2, 1}, 4)
	fa, err := dlpack.Import(ca.Ptr)
	require.NoError(t, err)
	a, err := dlimage.ToAlpha(fa)
	require.NoError(t, err)
	assert.Equal(t, uint8(3), a.AlphaAt(1, 1).A)
	runtime.KeepAlive(a)
	runtime.KeepAlive(rgba)
}

// The image owns the tensor: alive while the image is, released once
// after it is collected.
func TestImageOwnsTheTensor(t *testing.T) {
	ct := cBytes([]int64{2, 2, 4}, []int64{8, 4, 1}, 16)
	func() {
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		img, err := dlimage.ToNRGBA(f)
		require.NoError(t, err)
		for i := 0; i < 5; i++ {
			runtime.GC()
		}
		assert.Equal(t, int64(0), ct.Deletes(), "alive while the image is")
		assert.Equal(t, color.NRGBA{12, 13, 14, 15}, img.NRGBAAt(1, 1))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for ct.Deletes() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int64(1), ct.Deletes(), "released once the image is gone")
}

// Layouts an image cannot take are refused with the field named, and the
// Foreign stays the caller's (one deleter call when it closes it).
func TestImportRefusals(t *testing.T) {
	readOnly := cBytesSpec([]int64{2, 2}, []int64{2, 1}, 4)
	readOnly.Flags = uint64(dlpack.FlagReadOnly)
	legacy := cBytesSpec([]int64{2, 2}, []int64{2, 1}, 4)
	legacy.Legacy = true
	float := cBytesSpec([]int64{2, 2}, []int64{2, 1}, 16)
	float.Code, float.Bits = 2, 32
	cases := []struct {
		name   string
		spec   cshim.Spec
		four   bool
		err    error
		field  string
		legacy bool
	}{
		{"read-only", readOnly, false, dlpack.ErrReadOnly, "flags", false},
		{"legacy without AssumeWritable", legacy, false, dlpack.ErrReadOnly, "flags", true},
		{"float32", float, false, dlpack.ErrTypeMismatch, "dl_tensor.dtype", false},
		{"3-d as gray", cBytesSpec([]int64{2, 2, 1}, []int64{2, 1, 1}, 4), false, dlpack.ErrShape, "dl_tensor.ndim", false},
		{"transposed", cBytesSpec([]int64{2, 2}, []int64{1, 2}, 4), false, dlpack.ErrLayout, "dl_tensor.strides", false},
		{"overlapping rows", cBytesSpec([]int64{2, 3}, []int64{2, 1}, 6), false, dlpack.ErrLayout, "dl_tensor.strides", false},
		{"(H, W, 3)", cBytesSpec([]int64{2, 2, 3}, []int64{6, 3, 1}, 12), true, dlpack.ErrShape, "dl_tensor.shape", false},
		{"(C, H, W)", cBytesSpec([]int64{4, 2, 2}, []int64{4, 2, 1}, 16), true, dlpack.ErrShape, "dl_tensor.shape", false},
		{"planar channels", cBytesSpec([]int64{2, 2, 4}, []int64{2, 1, 4}, 16), true, dlpack.ErrLayout, "dl_tensor.strides", false},
		{"pixel stride 8", cBytesSpec([]int64{1, 2, 4}, []int64{16, 8, 1}, 16), true, dlpack.ErrLayout, "dl_tensor.strides", false},
		{"2-d as RGBA", cBytesSpec([]int64{2, 4}, []int64{4, 1}, 8), true, dlpack.ErrShape, "dl_tensor.shape", false},
	}
	for _, c := range cases {
		ct := cshim.Make(c.spec)
		var f dlpack.Foreign
		var err error
		if c.legacy {
			f, err = dlpack.ImportLegacy(ct.Ptr)
		} else {
			f, err = dlpack.Import(ct.Ptr)
		}
		require.NoError(t, err, c.name)
		if c.four {
			_, err = dlimage.ToRGBA(f)
		} else {
			_, err = dlimage.ToGray(f)
		}
		require.ErrorIs(t, err, c.err, c.name)
		var fe *dlpack.FieldError
		require.ErrorAs(t, err, &fe, c.name)
		assert.Equal(t, c.field, fe.Field, c.name)
		assert.Equal(t, int64(0), ct.Deletes(), c.name)
		require.NoError(t, f.Close())
		assert.Equal(t, int64(1), ct.Deletes(), c.name)
	}
	// A legacy tensor the caller vouches for is accepted.
	ct := cshim.Make(legacy)
	f, err := dlpack.ImportLegacy(ct.Ptr, dlpack.AssumeWritable())
	require.NoError(t, err)
	g, err := dlimage.ToGray(f)
	require.NoError(t, err)
	assert.Equal(t, uint8(3), g.GrayAt(1, 1).Y)
	runtime.KeepAlive(g)
	// A closed Foreign.
	ct = cshim.Make(cBytesSpec([]int64{2, 2}, []int64{2, 1}, 4))
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	f.Close()
	_, err = dlimage.ToGray(f)
	require.ErrorIs(t, err, dlpack.ErrClosed)
	_, err = dlimage.CopyToGray(f, dlimage.HWC)
	require.ErrorIs(t, err, dlpack.ErrClosed)
}

// Empty tensors become empty images.
func TestImportEmpty(t *testing.T) {
	ct := cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 3, Code: 1, Bits: 8, Lanes: 1,
		Shape: []int64{0, 5, 4}, Strides: []int64{20, 4, 1}, AllocData: true})
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	img, err := dlimage.ToRGBA(f)
	require.NoError(t, err)
	assert.True(t, img.Bounds().Empty())
	assert.Equal(t, 5, img.Bounds().Dx())
	runtime.KeepAlive(img)
}

// The Copy functions take any layout and never alias.
func TestCopies(t *testing.T) {
	hwc3 := dlpack.NewArray([]uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, []int64{2, 2, 3})
	hwc3.ReadOnly = true
	f, err := dlpack.From(hwc3)
	require.NoError(t, err)
	rgba, err := dlimage.CopyToRGBA(f, dlimage.HWC)
	require.NoError(t, err)
	assert.Equal(t, []uint8{1, 2, 3, 255, 4, 5, 6, 255, 7, 8, 9, 255, 10, 11, 12, 255}, rgba.Pix)
	f.Close()

	// (C, H, W) = (4, 1, 2), channels flipped by a negative stride.
	chw := &dlpack.Array[uint8]{Data: []uint8{1, 2, 10, 20, 30, 40, 50, 60}, Shape: []int64{4, 1, 2}, Strides: []int64{-2, 2, 1}, Offset: 6}
	f, err = dlpack.From(chw)
	require.NoError(t, err)
	n, err := dlimage.CopyToNRGBA(f, dlimage.CHW)
	require.NoError(t, err)
	assert.Equal(t, []uint8{50, 30, 10, 1, 60, 40, 20, 2}, n.Pix)
	_, err = dlimage.ToNRGBA(f)
	require.ErrorIs(t, err, dlpack.ErrShape, "the zero-copy path refuses (C, H, W)")
	f.Close()

	// (C, H, W) = (3, 2, 2), compact: channel planes.
	f, err = dlpack.From(dlpack.NewArray([]uint8{1, 2, 3, 4, 10, 20, 30, 40, 11, 22, 33, 44}, []int64{3, 2, 2}))
	require.NoError(t, err)
	rgba, err = dlimage.CopyToRGBA(f, dlimage.CHW)
	require.NoError(t, err)
	assert.Equal(t, []uint8{1, 10, 11, 255, 2, 20, 22, 255, 3, 30, 33, 255, 4, 40, 44, 255}, rgba.Pix)
	f.Close()

	// Transposed gray, and (1, H, W).
	tr := &dlpack.Array[uint8]{Data: []uint8{1, 2, 3, 4, 5, 6}, Shape: []int64{2, 3}, Strides: []int64{1, 2}}
	f, err = dlpack.From(tr)
	require.NoError(t, err)
	g, err := dlimage.CopyToGray(f, dlimage.HWC)
	require.NoError(t, err)
	assert.Equal(t, []uint8{1, 3, 5, 2, 4, 6}, g.Pix)
	g.Pix[0] = 99
	assert.Equal(t, uint8(1), tr.Data[0], "a copy")
	f.Close()
	f, err = dlpack.From(dlpack.NewArray([]uint8{7, 8}, []int64{1, 1, 2}))
	require.NoError(t, err)
	g, err = dlimage.CopyToGray(f, dlimage.CHW)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 2, 1), g.Rect)
	assert.Equal(t, []uint8{7, 8}, g.Pix)
	_, err = dlimage.CopyToRGBA(f, dlimage.CHW)
	require.ErrorIs(t, err, dlpack.ErrShape, "1 channel")
	_, err = dlimage.CopyToRGBA(f, dlimage.Layout(9))
	require.ErrorIs(t, err, dlpack.ErrRequirement)
	f.Close()

	// Not uint8; and a broadcast tensor larger than memory.
	f, err = dlpack.From(dlpack.NewArray([]float32{1, 2, 3}, []int64{1, 1, 3}))
	require.NoError(t, err)
	_, err = dlimage.CopyToRGBA(f, dlimage.HWC)
	require.ErrorIs(t, err, dlpack.ErrTypeMismatch)
	f.Close()
	huge := &dlpack.Array[uint8]{Data: []uint8{1, 2, 3}, Shape: []int64{1 << 31, 1 << 30, 3}, Strides: []int64{0, 0, 1}}
	f, err = dlpack.From(huge)
	require.NoError(t, err)
	_, err = dlimage.CopyToNRGBA(f, dlimage.HWC)
	require.ErrorIs(t, err, dlpack.ErrOverflow)
	f.Close()
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// An image goes out and comes back as the same memory.
func TestRoundTrip(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 9, 4))
	fill(src.Pix)
	sub := src.SubImage(image.Rect(2, 1, 7, 3)).(*image.NRGBA)
	tn, err := dlimage.FromImage(sub)
	require.NoError(t, err)
	m, err := dlpack.Produce(tn, dlpack.Request{})
	require.NoError(t, err)
	f, err := m.Import()
	require.NoError(t, err)
	back, err := dlimage.ToNRGBA(f)
	require.NoError(t, err)
	assert.Equal(t, &sub.Pix[0], &back.Pix[0])
	assert.Equal(t, sub.Stride, back.Stride)
	for y := 0; y < 2; y++ {
		for x := 0; x < 5; x++ {
			assert.Equal(t, sub.NRGBAAt(x+2, y+1), back.NRGBAAt(x, y))
		}
	}
	runtime.KeepAlive(back)
	assert.Equal(t, int64(0), settledOutstanding(), "the export is released when the image that owns it is collected")
}

// settledOutstanding collects garbage until no export is outstanding (or
// five seconds pass) and returns the count.
func settledOutstanding() int64 {
	for deadline := time.Now().Add(5 * time.Second); dlpack.Outstanding() != 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return dlpack.Outstanding()
}
