package dlflight

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// A Client closes once; a second Close is nil, and calls after Close fail
// with dlpack.ErrClosed, releasing what Put was given.
func TestClientCloseTwice(t *testing.T) {
	s, addr := serve(t, Options{})
	src := newRaw(t, dlpack.Float32, 4)
	if err := s.Register("x", src); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(addr, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Get(ctxT(t), "x"); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	p := newRaw(t, dlpack.Float32, 4)
	if err := c.Put(ctxT(t), "y", p); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("Put after Close: %v, want ErrClosed", err)
	}
	if got := p.released.Load(); got != p.exports.Load() {
		t.Fatalf("Put after Close: %d exports, %d released", p.exports.Load(), got)
	}
	if _, err := c.List(ctxT(t)); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("List after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Info(ctxT(t), "x"); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("Info after Close: %v, want ErrClosed", err)
	}
}
