//go:build dlpack_cflags

package viaflags_test

import (
	"os"
	"testing"

	"example.com/downstream/viaflags"
	"github.com/godlpack/dlpack"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if dlpack.Outstanding() != 0 || dlpack.ReadStats().CBlocks != 0 {
		println("FAIL: left behind:", dlpack.Outstanding(), "exports,", dlpack.ReadStats().CBlocks, "C blocks")
		code = 1
	}
	os.Exit(code)
}

func TestIotaThroughTheExchangeTable(t *testing.T) {
	f, err := dlpack.Import(viaflags.Iota(5), dlpack.RequireDataType(dlpack.Float32))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	xs, err := dlpack.Slice[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		if x != float32(i+1) {
			t.Fatalf("xs[%d] = %v, want %d (all: %v)", i, x, i+1, xs)
		}
	}
	if len(xs) != 5 {
		t.Fatalf("len %d, want 5", len(xs))
	}
	if dlpack.Outstanding() != 1 {
		t.Fatalf("Outstanding = %d with the tensor open, want 1", dlpack.Outstanding())
	}
}
