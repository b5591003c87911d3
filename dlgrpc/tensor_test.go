//go:build cgo

package dlgrpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// TestMisaligned: values a peer placed off a 64-byte boundary are never
// handed out as a misaligned view: DescribeTensor and From refuse them,
// DLPack copies them (FlagIsCopied) or refuses under CopyNever, and the
// memory is released once.
func TestMisaligned(t *testing.T) {
	src := make([]byte, 396)
	for i := range src {
		src[i] = byte(i * 3)
	}
	released := 0
	buf := dlpack.AlignedSlice[byte](len(src) + 8)
	copy(buf[8:], src)
	odd, err := NewTensor(dlpack.Float32, []int64{33, 3}, buf[8:8+len(src)], false, func() { released++ })
	if err != nil {
		t.Fatal(err)
	}
	if odd.Aligned() {
		t.Fatal("the test body is aligned")
	}
	var d dlpack.Description
	if err := odd.DescribeTensor(&d); !errors.Is(err, dlpack.ErrAlignment) {
		t.Fatalf("DescribeTensor: %v", err)
	}
	if _, err := dlpack.From(odd); !errors.Is(err, dlpack.ErrAlignment) {
		t.Fatalf("From: %v", err)
	}
	never := dlpack.Request{}
	never.Copy = dlpack.CopyNever
	if _, err := odd.DLPack(never); !errors.Is(err, dlpack.ErrRequest) {
		t.Fatalf("CopyNever: %v", err)
	}
	m, err := odd.DLPack(dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	if !f.IsCopied() || f.DataAddr()%Align != 0 || f.DataAddr() == odd.DataAddr() {
		t.Fatalf("copy: flags %v at %#x", f.Flags(), f.DataAddr())
	}
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil || !bytes.Equal(b[first:first+len(src)], src) {
		t.Fatalf("the copy differs (%v)", err)
	}
	f.Close()
	odd.Close()
	if released != 1 {
		t.Fatalf("released %d", released)
	}
	if _, err := odd.DLPack(dlpack.Request{}); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestNewTensorChecks: NewTensor takes only memory that holds the shape
// exactly, and refuses shapes a peer could use to overflow a size.
func TestNewTensorChecks(t *testing.T) {
	for _, c := range []struct {
		shape []int64
		n     int
	}{{[]int64{2, 2}, 15}, {[]int64{-1}, 0}, {[]int64{1 << 40, 1 << 40}, 0}, {make([]int64, dlpack.MaxNDim+1), 0}} {
		if _, err := NewTensor(dlpack.Float32, c.shape, make([]byte, c.n), false, nil); !errors.Is(err, dlpack.ErrShape) {
			t.Errorf("shape %v with %d bytes: %v", c.shape, c.n, err)
		}
	}
}
