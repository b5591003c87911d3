package dlimage_test

import (
	"image"
	"image/color"
	"runtime"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlimage"
)

// Go to Go, an image goes out and comes back without C: this also runs
// in the CGO_ENABLED=0 build.
func TestGoToGoWithoutC(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	src.SetNRGBA(4, 2, color.NRGBA{1, 2, 3, 4})
	tn, err := dlimage.FromImage(src.SubImage(image.Rect(1, 1, 5, 3)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.From(tn)
	if err != nil {
		t.Fatal(err)
	}
	back, err := dlimage.ToNRGBA(f)
	if err != nil {
		t.Fatal(err)
	}
	if &back.Pix[0] != &src.Pix[src.PixOffset(1, 1)] || back.Stride != src.Stride {
		t.Fatal("not the same memory")
	}
	if got := back.NRGBAAt(3, 1); got != (color.NRGBA{1, 2, 3, 4}) {
		t.Fatalf("pixel (3, 1) = %v", got)
	}
	runtime.KeepAlive(back)

	g, err := dlpack.From(dlpack.NewArray([]uint8{1, 2, 3, 4, 5, 6}, []int64{1, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := dlimage.CopyToRGBA(g, dlimage.HWC)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint8{1, 2, 3, 255, 4, 5, 6, 255}; string(c.Pix) != string(want) {
		t.Fatalf("copy = %v, want %v", c.Pix, want)
	}
}
