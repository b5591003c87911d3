//go:build !cgo

package dlgomlx_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/backends/simplego"
)

// Without cgo the bridge works Go to Go (dlpack.From shares, ToTensor
// copies into simplego); handing a tensor to C needs cgo.
func TestWithoutCgo(t *testing.T) {
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	x, err := dlgomlx.ToTensor(dlpack.NewArray([]int32{1, 2, 3, 4}, []int64{2, 2}), b)
	if err != nil {
		t.Fatal(err)
	}
	e, err := dlgomlx.FromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.From(e)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dlpack.ReadOnlySlice[int32](f); err != nil || !slices.Equal(v, []int32{1, 2, 3, 4}) {
		t.Fatalf("%v %v", v, err)
	}
	f.Close()
	if _, err := e.DLPack(dlpack.Request{}); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Fatalf("DLPack without cgo: %v", err)
	}
	if dlgomlx.Exports(x) != 0 {
		t.Fatalf("exports %d", dlgomlx.Exports(x))
	}
	if y, err := dlgomlx.ToTensor(e, b); err != nil || y != x {
		t.Fatalf("round trip: %v", err)
	}
	x.MustFinalizeAll()
}
