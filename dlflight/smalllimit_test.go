package dlflight

import (
	"errors"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
)

// TestSmallMessageLimit: a 16 KiB message limit still moves a scalar and
// small tensors both ways, splitting along the first dimension what does
// not fit in one message; a limit too small for the stream's metadata
// fails with ErrLimit saying so.
func TestSmallMessageLimit(t *testing.T) {
	const limit = 16 << 10
	s, addr := serve(t, Options{MaxMessageBytes: limit})
	c := dial(t, addr, ClientOptions{MaxMessageBytes: limit})
	for _, shape := range [][]int64{{}, {3}, {100, 16}, {4000, 3}, {2, 3000}} {
		src := newRaw(t, dlpack.Float32, shape...)
		if err := s.Register("t", src); err != nil {
			t.Fatal(err)
		}
		frames := 0
		recvHook = func([]byte) { frames++ }
		got, err := c.Get(ctxT(t), "t")
		recvHook = nil
		if err != nil {
			t.Fatalf("%v: Get: %v", shape, err)
		}
		sameTensor(t, got, src)
		if err := c.Put(ctxT(t), "back", got); err != nil {
			t.Fatalf("%v: Put: %v", shape, err)
		}
		got.Close()
		again, err := c.Get(ctxT(t), "back")
		if err != nil {
			t.Fatalf("%v: Get of the put: %v", shape, err)
		}
		sameTensor(t, again, src)
		again.Close()
		if want := (len(src.data) + limit - 1) / limit; len(src.data) > limit && frames < want {
			t.Fatalf("%v: %d bytes in %d messages of at most %d", shape, len(src.data), frames, limit)
		}
		t.Logf("%v: %d bytes in %d messages", shape, len(src.data), frames)
	}

	// a row too wide for a message
	wide := newRaw(t, dlpack.Float32, 2, 5000)
	if err := c.Put(ctxT(t), "wide", wide); !errors.Is(err, ErrLimit) {
		t.Fatalf("wide row: %v, want ErrLimit", err)
	}
	// a limit below the stream's metadata
	for _, tiny := range []int{100, 400} {
		s2, addr2 := serve(t, Options{MaxMessageBytes: tiny})
		if err := s2.Register("t", newRaw(t, dlpack.Float32)); err != nil {
			t.Fatal(err)
		}
		c2 := dial(t, addr2, ClientOptions{MaxMessageBytes: tiny})
		err := c2.Put(ctxT(t), "p", newRaw(t, dlpack.Float32))
		if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("Put with a %d-byte limit: %v, want ErrLimit naming the metadata", tiny, err)
		}
		t.Logf("%d: %v", tiny, err)
		_, err = c2.Get(ctxT(t), "t")
		if err == nil || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("Get with a %d-byte limit: %v, want an error naming the metadata", tiny, err)
		}
		t.Logf("%d: %v", tiny, err)
	}
	// room for a batch but not for a schema with a long name
	s3, addr3 := serve(t, Options{MaxMessageBytes: 1024})
	long := strings.Repeat("n", 1000)
	if err := s3.Register(long, newRaw(t, dlpack.Float32)); err != nil {
		t.Fatal(err)
	}
	c3 := dial(t, addr3, ClientOptions{MaxMessageBytes: 1024})
	err := c3.Put(ctxT(t), long, newRaw(t, dlpack.Float32))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "schema message's metadata") {
		t.Fatalf("Put of a long name with a 1 KiB limit: %v, want ErrLimit naming the schema", err)
	}
	_, err = c3.Get(ctxT(t), long)
	if err == nil || !strings.Contains(err.Error(), "schema message's metadata") {
		t.Fatalf("Get of a long name with a 1 KiB limit: %v, want an error naming the schema", err)
	}
	t.Logf("1024: %v", err)
}
