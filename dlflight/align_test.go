//go:build cgo

package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack"
)

// TestAlignment: a received tensor is shared at 64-byte alignment, its
// export the received memory itself (dlgrpc's TestMisaligned covers the
// values a peer places off that boundary).
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
}
