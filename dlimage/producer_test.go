//go:build cgo

package dlimage_test

import (
	"fmt"
	"image"
	"image/color"
	"runtime"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fill writes a distinct byte into every sample of pix.
func fill(pix []uint8) {
	for i := range pix {
		pix[i] = uint8(i*7 + 3)
	}
}

// eightBit is one 8-bit image of each type FromImage exports, 5 wide (odd)
// and 3 high, with the bytes per pixel of its Pix.
func eightBit() []struct {
	img      image.Image
	pix      []uint8
	stride   int
	channels int
} {
	r := image.Rect(0, 0, 5, 3)
	gray, alpha := image.NewGray(r), image.NewAlpha(r)
	pal := image.NewPaletted(r, color.Palette{color.Black, color.White})
	rgba, nrgba, cmyk := image.NewRGBA(r), image.NewNRGBA(r), image.NewCMYK(r)
	type c = struct {
		img      image.Image
		pix      []uint8
		stride   int
		channels int
	}
	out := []c{
		{gray, gray.Pix, gray.Stride, 1}, {alpha, alpha.Pix, alpha.Stride, 1}, {pal, pal.Pix, pal.Stride, 1},
		{rgba, rgba.Pix, rgba.Stride, 4}, {nrgba, nrgba.Pix, nrgba.Stride, 4}, {cmyk, cmyk.Pix, cmyk.Stride, 4},
	}
	for _, x := range out {
		fill(x.pix)
	}
	return out
}

// sample reads element (y, x, ch) of an image's Pix as the image package
// lays it out.
func sample(pix []uint8, stride, channels, y, x, ch int) uint8 {
	return pix[y*stride+x*channels+ch]
}

// Every 8-bit type goes Go to Go (dlpack.From) and through C structs
// (Produce, Import) without a copy, with the shape, strides and samples of
// the package documentation.
func TestPixelsEveryType(t *testing.T) {
	for _, c := range eightBit() {
		name := fmt.Sprintf("%T", c.img)
		tn, err := dlimage.FromImage(c.img)
		require.NoError(t, err, name)
		wantShape, wantStrides := []int64{3, 5}, []int64{int64(c.stride), 1}
		if c.channels == 4 {
			wantShape, wantStrides = []int64{3, 5, 4}, []int64{int64(c.stride), 4, 1}
		}
		assert.Equal(t, wantShape, tn.Shape, name)
		assert.Equal(t, wantStrides, tn.Strides, name)

		for _, via := range []string{"From", "Produce"} {
			var f dlpack.Foreign
			if via == "From" {
				f, err = dlpack.From(tn)
			} else {
				var m dlpack.Managed
				m, err = dlpack.Produce(tn, dlpack.Request{})
				require.NoError(t, err, name)
				require.NotNil(t, m.Versioned, name)
				f, err = m.Import()
			}
			require.NoError(t, err, name, via)
			assert.Equal(t, dlpack.Uint8, f.DataType(), name)
			assert.Equal(t, dlpack.CPUDevice, f.Device(), name)
			assert.Equal(t, wantShape, f.Shape(), name)
			assert.Equal(t, wantStrides, f.Strides(), name)
			assert.True(t, f.Writable(), name)
			assert.Equal(t, uintptr(unsafe.Pointer(&c.pix[0])), f.DataAddr()+uintptr(f.ByteOffset()), name+": the image's memory, not a copy")
			v, err := dlpack.ViewOf[uint8](f)
			require.NoError(t, err)
			for y := 0; y < 3; y++ {
				for x := 0; x < 5; x++ {
					for ch := 0; ch < c.channels; ch++ {
						idx := []int{y, x, ch}[:len(wantShape)]
						got, err := v.At(idx...)
						require.NoError(t, err)
						require.Equal(t, sample(c.pix, c.stride, c.channels, y, x, ch), got, "%s %v", name, idx)
					}
				}
			}
			// A write through the tensor is a write to the image.
			last := []int{2, 4, c.channels - 1}[:len(wantShape)]
			require.NoError(t, v.Set(0xab, last...))
			assert.Equal(t, uint8(0xab), c.pix[len(c.pix)-1], name)
			c.pix[len(c.pix)-1] = 0
			require.NoError(t, f.Close())
		}
		runtime.KeepAlive(c.img)
	}
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// A sub-image is its parent's memory at an offset with the parent's row
// stride, for one- and four-channel types, and for legacy consumers too.
func TestSubImage(t *testing.T) {
	parent := image.NewNRGBA(image.Rect(0, 0, 7, 5))
	fill(parent.Pix)
	gparent := image.NewGray(image.Rect(-3, -2, 6, 9)) // a Rect not at the origin
	fill(gparent.Pix)
	cases := []struct {
		sub      image.Image
		parent   []uint8
		stride   int
		first    int
		h, w, ch int
	}{
		{parent.SubImage(image.Rect(1, 2, 6, 4)), parent.Pix, parent.Stride, parent.PixOffset(1, 2), 2, 5, 4},
		{parent.SubImage(image.Rect(6, 4, 7, 5)), parent.Pix, parent.Stride, parent.PixOffset(6, 4), 1, 1, 4},
		{gparent.SubImage(image.Rect(-1, 0, 4, 7)), gparent.Pix, gparent.Stride, gparent.PixOffset(-1, 0), 7, 5, 1},
	}
	for _, c := range cases {
		tn, err := dlimage.FromImage(c.sub)
		require.NoError(t, err)
		for _, req := range []dlpack.Request{{}, {Legacy: true}} { // versioned, legacy
			m, err := dlpack.Produce(tn, req)
			require.NoError(t, err)
			assert.Equal(t, req.Legacy, m.Legacy != nil)
			f, err := m.Import(dlpack.AssumeWritable())
			require.NoError(t, err)
			assert.Equal(t, int64(c.stride), f.Stride(0))
			assert.Equal(t, uintptr(unsafe.Pointer(&c.parent[c.first])), f.DataAddr()+uintptr(f.ByteOffset()), "no copy")
			v, err := dlpack.ViewOf[uint8](f)
			require.NoError(t, err)
			var want []uint8
			for y := 0; y < c.h; y++ {
				for x := 0; x < c.w*c.ch; x++ {
					want = append(want, c.parent[c.first+y*c.stride+x])
				}
			}
			got := make([]uint8, v.Len())
			_, err = v.CopyTo(got)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			require.NoError(t, f.Close())
		}
	}
	runtime.KeepAlive(parent)
	runtime.KeepAlive(gparent)
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// Empty images are tensors with a zero dimension.
func TestEmptyImages(t *testing.T) {
	full := image.NewRGBA(image.Rect(0, 0, 4, 4))
	cases := []struct {
		img   image.Image
		shape []int64
	}{
		{image.NewRGBA(image.Rect(0, 0, 0, 3)), []int64{3, 0, 4}},
		{image.NewGray(image.Rect(2, 2, 2, 2)), []int64{0, 0}},
		{full.SubImage(image.Rect(10, 10, 12, 12)), []int64{0, 0, 4}}, // no intersection
		{&image.Gray{}, []int64{0, 0}},
	}
	for _, c := range cases {
		tn, err := dlimage.FromImage(c.img)
		require.NoError(t, err)
		assert.Equal(t, c.shape, tn.Shape)
		f, err := dlpack.From(tn)
		require.NoError(t, err)
		assert.Equal(t, c.shape, f.Shape())
		assert.Equal(t, int64(0), f.Len())
		f.Close()
		m, err := dlpack.Produce(tn, dlpack.Request{})
		require.NoError(t, err)
		m.Close()
	}
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

func TestPixelsRefusals(t *testing.T) {
	r := image.Rect(0, 0, 3, 2)
	cases := []struct {
		img image.Image
		err error
	}{
		{image.NewGray16(r), dlimage.ErrBigEndian},
		{image.NewRGBA64(r), dlimage.ErrBigEndian},
		{image.NewNRGBA64(r), dlimage.ErrBigEndian},
		{image.NewYCbCr(r, image.YCbCrSubsampleRatio420), dlimage.ErrUnsupported},
		{image.NewUniform(color.White), dlimage.ErrUnsupported},
		{(*image.Gray)(nil), dlpack.ErrNilPointer},
		{nil, dlpack.ErrNilPointer},
		{&image.Gray{Pix: make([]uint8, 5), Stride: 3, Rect: r}, dlimage.ErrMalformed},  // needs 6 bytes
		{&image.RGBA{Pix: make([]uint8, 24), Stride: 8, Rect: r}, dlimage.ErrMalformed}, // rows overlap
		{&image.Gray{Pix: make([]uint8, 6), Stride: -3, Rect: r}, dlimage.ErrMalformed},
	}
	for _, c := range cases {
		_, err := dlimage.FromImage(c.img)
		require.ErrorIs(t, err, c.err, "%T", c.img)
		var fe *dlpack.FieldError
		require.ErrorAs(t, err, &fe)
		assert.NotEmpty(t, fe.Why)
	}
	// A Tensor whose fields were changed after FromImage is checked again.
	tn, err := dlimage.FromImage(image.NewGray(r))
	require.NoError(t, err)
	tn.Pix = tn.Pix[:4]
	_, err = dlpack.Produce(tn, dlpack.Request{})
	require.ErrorIs(t, err, dlimage.ErrMalformed)
	_, err = dlpack.From(tn)
	require.ErrorIs(t, err, dlimage.ErrMalformed)
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// The tensor keeps the image's memory alive for a C consumer after Go
// has dropped both the image and the tensor.
func TestExportOutlivesImage(t *testing.T) {
	m, want := func() (dlpack.Managed, []uint8) {
		img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
		fill(img.Pix)
		tn, err := dlimage.FromImage(img.SubImage(image.Rect(1, 1, 3, 2)))
		require.NoError(t, err)
		m, err := dlpack.Produce(tn, dlpack.Request{})
		require.NoError(t, err)
		return m, append([]uint8(nil), img.Pix[img.PixOffset(1, 1):img.PixOffset(3, 1)]...)
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	// Garbage over where freed memory was, if it was freed.
	junk := make([][]byte, 64)
	for i := range junk {
		junk[i] = make([]byte, 64*64*4)
		for j := range junk[i] {
			junk[i][j] = 0xee
		}
	}
	f, err := m.Import()
	require.NoError(t, err)
	v, err := dlpack.ViewOf[uint8](f)
	require.NoError(t, err)
	got := make([]uint8, v.Len())
	_, err = v.CopyTo(got)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, int64(1), dlpack.Outstanding())
	f.Close()
	assert.Equal(t, int64(0), dlpack.Outstanding())
	runtime.KeepAlive(junk)
}

// Every chroma sample the image package reads for a pixel is the plane
// tensor's element at the same place, and every element is read by some
// pixel: the (CH, CW) rule matches COffset for every ratio, for odd sizes
// and sub-images starting at odd coordinates.
func TestPlanes(t *testing.T) {
	ratios := []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	}
	for _, ratio := range ratios {
		parent := image.NewYCbCr(image.Rect(0, 0, 13, 7), ratio)
		fill(parent.Y)
		fill(parent.Cb)
		for i := range parent.Cr {
			parent.Cr[i] = ^parent.Cb[i]
		}
		for _, img := range []*image.YCbCr{parent, parent.SubImage(image.Rect(3, 1, 12, 6)).(*image.YCbCr)} {
			name := fmt.Sprintf("%v %v", ratio, img.Rect)
			y, cb, cr, err := dlimage.FromYCbCr(img)
			require.NoError(t, err, name)
			r := img.Rect
			assert.Equal(t, []int64{int64(r.Dy()), int64(r.Dx())}, y.Shape, name)
			assert.Equal(t, []int64{int64(img.YStride), 1}, y.Strides, name)
			assert.Equal(t, cb.Shape, cr.Shape, name)
			assert.Equal(t, []int64{int64(img.CStride), 1}, cb.Strides, name)
			fy, err := dlpack.From(y)
			require.NoError(t, err)
			fcb, err := dlpack.From(cb)
			require.NoError(t, err)
			fcr, err := dlpack.From(cr)
			require.NoError(t, err)
			vy, _ := dlpack.ViewOf[uint8](fy)
			vcb, _ := dlpack.ViewOf[uint8](fcb)
			vcr, _ := dlpack.ViewOf[uint8](fcr)
			ch, cw := int(cb.Shape[0]), int(cb.Shape[1])
			seen := make([]bool, ch*cw)
			c0 := img.COffset(r.Min.X, r.Min.Y)
			for py := r.Min.Y; py < r.Max.Y; py++ {
				for px := r.Min.X; px < r.Max.X; px++ {
					got, _ := vy.At(py-r.Min.Y, px-r.Min.X)
					require.Equal(t, img.Y[img.YOffset(px, py)], got, name)
					k := img.COffset(px, py) - c0
					i, j := k/img.CStride, k%img.CStride
					require.Less(t, i, ch, name)
					require.Less(t, j, cw, name)
					seen[i*cw+j] = true
					gb, _ := vcb.At(i, j)
					gr, _ := vcr.At(i, j)
					require.Equal(t, img.Cb[img.COffset(px, py)], gb, name)
					require.Equal(t, img.Cr[img.COffset(px, py)], gr, name)
				}
			}
			for k, s := range seen {
				require.True(t, s, "%s: chroma sample %d belongs to no pixel", name, k)
			}
			fy.Close()
			fcb.Close()
			fcr.Close()
		}
	}
	_, _, _, err := dlimage.FromYCbCr(nil)
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	_, _, _, err = dlimage.FromYCbCr(&image.YCbCr{Y: make([]uint8, 4), YStride: 2, Rect: image.Rect(0, 0, 2, 2)})
	require.ErrorIs(t, err, dlimage.ErrMalformed, "no chroma memory")
}

// The 16-bit types are copied to native uint16, samples exact, sub-images
// included, and the copy shares nothing with the image.
func TestCopy16(t *testing.T) {
	g := image.NewGray16(image.Rect(0, 0, 3, 2))
	for i := 0; i < 6; i++ {
		g.SetGray16(i%3, i/3, color.Gray16{Y: uint16(0x1234 + 0x0101*i)})
	}
	a, err := dlimage.CopyFromGray16(g)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, a.Shape)
	assert.Equal(t, []uint16{0x1234, 0x1335, 0x1436, 0x1537, 0x1638, 0x1739}, a.Data)
	assert.Zero(t, uintptr(unsafe.Pointer(&a.Data[0]))%256, "aligned")

	n := image.NewNRGBA64(image.Rect(0, 0, 5, 4))
	rgba := image.NewRGBA64(image.Rect(0, 0, 5, 4))
	for y := 0; y < 4; y++ {
		for x := 0; x < 5; x++ {
			c := color.NRGBA64{R: uint16(x<<12 | y), G: 0xff00 | uint16(x), B: 0x00ff, A: uint16(0x8000 + x + y)}
			n.SetNRGBA64(x, y, c)
			rgba.SetRGBA64(x, y, color.RGBA64{R: c.R / 2, G: c.G / 2, B: c.B / 2, A: c.A})
		}
	}
	sub := image.Rect(1, 1, 4, 3)
	an, err := dlimage.CopyFromNRGBA64(n.SubImage(sub).(*image.NRGBA64))
	require.NoError(t, err)
	ar, err := dlimage.CopyFromRGBA64(rgba.SubImage(sub).(*image.RGBA64))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3, 4}, an.Shape)
	for y := sub.Min.Y; y < sub.Max.Y; y++ {
		for x := sub.Min.X; x < sub.Max.X; x++ {
			i := ((y-sub.Min.Y)*3 + (x - sub.Min.X)) * 4
			c := n.NRGBA64At(x, y)
			assert.Equal(t, []uint16{c.R, c.G, c.B, c.A}, an.Data[i:i+4])
			d := rgba.RGBA64At(x, y)
			assert.Equal(t, []uint16{d.R, d.G, d.B, d.A}, ar.Data[i:i+4])
		}
	}
	// The copy goes to C as any Array does.
	m, err := dlpack.Produce(an, dlpack.Request{})
	require.NoError(t, err)
	f, err := m.Import()
	require.NoError(t, err)
	assert.Equal(t, dlpack.Uint16, f.DataType())
	xs, err := dlpack.Slice[uint16](f)
	require.NoError(t, err)
	assert.Equal(t, an.Data, xs)
	f.Close()

	empty, err := dlimage.CopyFromGray16(image.NewGray16(image.Rect(0, 0, 0, 0)))
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, empty.Shape)
	_, err = dlimage.CopyFromGray16(&image.Gray16{Pix: make([]uint8, 3), Stride: 2, Rect: image.Rect(0, 0, 1, 2)})
	require.ErrorIs(t, err, dlimage.ErrMalformed)
	_, err = dlimage.CopyFromRGBA64(nil)
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

func TestPalette(t *testing.T) {
	p := color.Palette{color.RGBA{1, 2, 3, 255}, color.NRGBA{200, 100, 50, 128}, color.Gray{7}}
	a := dlimage.CopyFromPalette(p)
	assert.Equal(t, []int64{3, 4}, a.Shape)
	assert.Equal(t, []uint8{1, 2, 3, 255, 200, 100, 50, 128, 7, 7, 7, 255}, a.Data)
	assert.Equal(t, []int64{0, 4}, dlimage.CopyFromPalette(nil).Shape)
}

// Many exports of one sub-image, released by threads Go never created.
func TestExportsReleasedOnCThreads(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	tn, err := dlimage.FromImage(img.SubImage(image.Rect(3, 5, 20, 30)))
	require.NoError(t, err)
	ptrs := make([]unsafe.Pointer, 200)
	for i := range ptrs {
		m, err := dlpack.Produce(tn, dlpack.Request{})
		require.NoError(t, err)
		ptrs[i] = m.Pointer()
	}
	assert.Equal(t, int64(len(ptrs)), dlpack.Outstanding())
	cshim.ReleaseOnThreads(ptrs, 4, false)
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// A read-only tensor reaches versioned consumers flagged and legacy or
// writing ones as a copy, never as writable image memory.
func TestReadOnlyTensor(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 4, 3))
	fill(img.Pix)
	tn, err := dlimage.FromImage(img)
	require.NoError(t, err)
	tn.ReadOnly = true
	m, err := dlpack.Produce(tn, dlpack.Request{})
	require.NoError(t, err)
	f, err := m.Import()
	require.NoError(t, err)
	assert.False(t, f.Writable())
	assert.Equal(t, uintptr(unsafe.Pointer(&img.Pix[0])), f.DataAddr()+uintptr(f.ByteOffset()), "shared")
	_, err = dlimage.ToGray(f)
	require.ErrorIs(t, err, dlpack.ErrReadOnly)
	f.Close()

	m, err = dlpack.Produce(tn, dlpack.Request{Legacy: true}) // legacy: cannot carry the flag
	require.NoError(t, err)
	f, err = m.Import(dlpack.AssumeWritable())
	require.NoError(t, err)
	assert.NotEqual(t, uintptr(unsafe.Pointer(&img.Pix[0])), f.DataAddr(), "a copy")
	g, err := dlimage.ToGray(f)
	require.NoError(t, err)
	assert.Equal(t, img.Pix, g.Pix)
	runtime.KeepAlive(g)

	req := dlpack.Request{}
	req.Writable, req.Copy = true, dlpack.CopyNever
	_, err = dlpack.Produce(tn, req)
	require.ErrorIs(t, err, dlpack.ErrReadOnly)
}
