package dloip

import (
	"bytes"
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// A tensor whose values lie off a 64-byte boundary (a shared-memory
// input at an offset a peer chose) is never shared by chance: describing
// it fails with ErrAlignment, DLPack copies it with IS_COPIED, and
// refuses under CopyNever.
func TestMisalignedTensor(t *testing.T) {
	buf := dlpack.AlignedSlice[byte](64)
	for i := range buf {
		buf[i] = byte(i)
	}
	x, err := newTensor("input", "x", "FP32", []int64{2, 2}, buf[8:24], false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var d dlpack.Description
	if err := x.DescribeTensor(&d); !errors.Is(err, dlpack.ErrAlignment) {
		t.Fatalf("describe: %v", err)
	}
	m, err := x.DLPack(dlpack.Request{})
	if errors.Is(err, dlpack.ErrCgoRequired) {
		t.Skip("the aligned copy is a dlpack.Buffer, which needs cgo")
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, first, _ := dlpack.ReadOnlyBytes(f)
	if !f.IsCopied() || !bytes.Equal(b[first:first+16], buf[8:24]) || f.DataAddr()%Align != 0 {
		t.Fatalf("copy: copied %v addr %#x", f.IsCopied(), f.DataAddr())
	}
	req := dlpack.Request{}
	req.Copy = dlpack.CopyNever
	if _, err := x.DLPack(req); !errors.Is(err, dlpack.ErrRequest) {
		t.Fatalf("CopyNever: %v", err)
	}
	// Released: exports fail with ErrClosed.
	x.Close()
	if err := x.DescribeTensor(&d); !errors.Is(err, dlpack.ErrAlignment) && !errors.Is(err, dlpack.ErrClosed) {
		t.Fatal(err)
	}
	if _, err := x.DLPack(dlpack.Request{}); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("after release: %v", err)
	}
}
