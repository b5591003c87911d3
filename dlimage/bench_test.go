//go:build cgo

package dlimage_test

import (
	"image"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
)

// A 1920x1080 RGBA frame: the cost does not depend on its size (no copy).
func BenchmarkFromImage(b *testing.B) {
	img := image.NewNRGBA(image.Rect(0, 0, 1920, 1080))
	b.ReportAllocs()
	for b.Loop() {
		t, err := dlimage.FromImage(img)
		if err != nil {
			b.Fatal(err)
		}
		f, err := dlpack.From(t)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// The same frame lent to a C consumer and released by it.
func BenchmarkProduceRelease(b *testing.B) {
	img := image.NewNRGBA(image.Rect(0, 0, 1920, 1080))
	t, err := dlimage.FromImage(img)
	if err != nil {
		b.Fatal(err)
	}
	req := dlpack.Request{}
	b.ReportAllocs()
	for b.Loop() {
		m, err := dlpack.Produce(t, req)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

// The explicit copy of a 16-bit frame (big-endian bytes to native uint16).
func BenchmarkCopyFromNRGBA64(b *testing.B) {
	img := image.NewNRGBA64(image.Rect(0, 0, 1920, 1080))
	b.SetBytes(int64(len(img.Pix)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dlimage.CopyFromNRGBA64(img); err != nil {
			b.Fatal(err)
		}
	}
}

// An (H, W, 3) tensor copied into an image (the path for RGB arrays).
func BenchmarkCopyToRGBAFromHWC3(b *testing.B) {
	a := dlpack.NewArray(make([]uint8, 1920*1080*3), []int64{1080, 1920, 3})
	f, err := dlpack.From(a)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(1920 * 1080 * 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dlimage.CopyToRGBA(f, dlimage.HWC); err != nil {
			b.Fatal(err)
		}
	}
}
