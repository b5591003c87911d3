//go:build cgo

package dlflight

import (
	"bytes"
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// TestAlignment: a received tensor is shared only at 64-byte alignment;
// values a peer placed off it are copied explicitly (FlagIsCopied), or
// refused under CopyNever, never handed out as a misaligned view.
func TestAlignment(t *testing.T) {
	s, addr := serve(t, Options{})
	c := dial(t, addr, ClientOptions{})
	src := newRaw(t, dlpack.Float32, 33, 3) // 396 bytes: a small, odd body
	if err := s.Register("t", src); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	m, err := got.DLPack(dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Versioned.DLTensor.Data != got.DataAddr() || m.Versioned.Flags&dlpack.FlagIsCopied != 0 || got.DataAddr()%64 != 0 {
		t.Fatalf("received tensor: export at %#x flags %v, data at %#x", m.Versioned.DLTensor.Data, m.Versioned.Flags, got.DataAddr())
	}
	m.Close()
	got.Close()

	// a body whose values sit 8 bytes off a 64-byte boundary
	released := 0
	buf := dlpack.AlignedSlice[byte](len(src.data) + 8)
	copy(buf[8:], src.data)
	odd := &Tensor{dtype: dlpack.Float32, shape: []int64{33, 3}, data: buf[8 : 8+len(src.data)], owner: newOwner(func() { released++ })}
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
	m, err = odd.DLPack(dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	if !f.IsCopied() || f.DataAddr()%64 != 0 || f.DataAddr() == odd.DataAddr() {
		t.Fatalf("copy: flags %v at %#x", f.Flags(), f.DataAddr())
	}
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil || !bytes.Equal(b[first:first+len(src.data)], src.data) {
		t.Fatalf("the copy differs (%v)", err)
	}
	f.Close()
	odd.Close()
	if released != 1 {
		t.Fatalf("released %d", released)
	}
}
