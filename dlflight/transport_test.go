package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
)

func TestTransportSizes(t *testing.T) {
	for _, c := range []struct {
		tr                Transport
		maxMessage        int
		window, conn      int32
		readBuf, writeBuf int
	}{
		{Transport{}, DefaultMaxMessageBytes, DefaultWindowBytes, DefaultConnWindowBytes, DefaultIOBufferBytes, DefaultIOBufferBytes},
		{Transport{}, 1 << 20, 1 << 20, DefaultConnWindowBytes, DefaultIOBufferBytes, DefaultIOBufferBytes},
		{Transport{WindowBytes: 1 << 40}, 512 << 20, 512 << 20, 512 << 20, DefaultIOBufferBytes, DefaultIOBufferBytes},
		{Transport{WindowBytes: 1 << 40, ConnWindowBytes: 1 << 40}, 1 << 40, 1 << 30, 1 << 30, DefaultIOBufferBytes, DefaultIOBufferBytes},
		{Transport{WindowBytes: 1000}, 1 << 20, minWindow, DefaultConnWindowBytes, DefaultIOBufferBytes, DefaultIOBufferBytes},
		{Transport{ConnWindowBytes: 1 << 10, ReadBufferBytes: -1, WriteBufferBytes: 4096}, 4 << 20, 4 << 20, 4 << 20, 0, 4096},
	} {
		w, cw, r, wr := c.tr.sizes(c.maxMessage)
		if w != c.window || cw != c.conn || r != c.readBuf || wr != c.writeBuf {
			t.Errorf("%+v, message %d: window %d conn %d read %d write %d; want %d %d %d %d",
				c.tr, c.maxMessage, w, cw, r, wr, c.window, c.conn, c.readBuf, c.writeBuf)
		}
	}
}

// TestTransportLimits: windows far beyond the message limits do not let a
// client send more than the server accepts.
func TestTransportLimits(t *testing.T) {
	huge := Transport{WindowBytes: 1 << 30, ConnWindowBytes: 1 << 30}
	s, addr := serve(t, Options{MaxMessageBytes: 1 << 20, MaxPutBytes: 3 << 20, Transport: huge})
	src := newRaw(t, dlpack.Float32, 1024, 1024) // 4 MiB
	one := dial(t, addr, ClientOptions{MaxMessageBytes: 64 << 20, Transport: huge})
	wantCode(t, one.Put(ctxT(t), "x", src), codes.ResourceExhausted) // one message of 4 MiB
	split := dial(t, addr, ClientOptions{MaxMessageBytes: 1 << 20, Transport: huge})
	wantCode(t, split.Put(ctxT(t), "x", src), codes.ResourceExhausted) // 4 MiB in one put
	if len(s.Names()) != 0 {
		t.Fatalf("held %v", s.Names())
	}
	small := newRaw(t, dlpack.Float32, 512, 1024) // 2 MiB, split in messages of 1 MiB
	if err := split.Put(ctxT(t), "y", small); err != nil {
		t.Fatal(err)
	}
	got, err := split.Get(ctxT(t), "y")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, small)
	got.Close()
}

// TestFramePool: frame-sized buffers are reused as they were left (gRPC
// overwrites them whole); other sizes come from gRPC's default pool.
func TestFramePool(t *testing.T) {
	for _, n := range []int{frameBytes/2 + 1, 12345, frameBytes} {
		b := frames.Get(n)
		if len(*b) != n || cap(*b) != frameBytes {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		frames.Put(b)
	}
	for _, n := range []int{10, frameBytes / 2, frameBytes + 1, 1 << 20} {
		b := frames.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		frames.Put(b)
	}
}
