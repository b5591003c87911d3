package dlgrpc

import (
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
)

// TestBodyClass: every class holds its size, wastes at most an eighth of
// it, and is its own class (Free recognises the pool's buffers by it).
func TestBodyClass(t *testing.T) {
	for n := pooledBodyBytes; n < 1<<31; n += n/7 + 4093 {
		c := bodyClass(n)
		if c < n || c-n > n/8 || bodyClass(c) != c {
			t.Fatalf("bodyClass(%d) = %d", n, c)
		}
	}
	for _, n := range []int{1 << 20, 1<<20 + 1, 256 << 20, 256<<20 + 64} {
		if c := bodyClass(n); c < n || c-n > n/8 {
			t.Fatalf("bodyClass(%d) = %d", n, c)
		}
	}
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Align == 0 }

// TestBodyAllocator: aligned bodies of the asked length, large ones reused
// after Free (sync.Pool may drop a buffer, as it does at random under the
// race detector: a few tries), and Reallocate keeping the contents.
func TestBodyAllocator(t *testing.T) {
	a := &bodyAllocator{}
	for _, n := range []int{0, 1, 100, pooledBodyBytes - 1, pooledBodyBytes, 3<<20 + 5} {
		b := a.Allocate(n)
		if len(b) != n || (n > 0 && !aligned(b)) {
			t.Fatalf("Allocate(%d): len %d, aligned %v", n, len(b), aligned(b))
		}
		a.Free(b)
	}
	n := 5<<20 + 3
	reused := false
	for range 10 {
		b := a.Allocate(n)
		p := unsafe.SliceData(b)
		a.Free(b)
		if c := a.Allocate(n + 1000); unsafe.SliceData(c) == p { // the same class
			reused = true
			a.Free(c)
			break
		}
	}
	if !reused {
		t.Fatal("a freed large body was never handed out again")
	}
	b := a.Allocate(pooledBodyBytes - 10)
	for i := range b {
		b[i] = byte(i)
	}
	for _, m := range []int{pooledBodyBytes - 20, 2 * pooledBodyBytes, 10} {
		nb := a.Reallocate(m, b)
		if len(nb) != m || !aligned(nb) {
			t.Fatalf("Reallocate(%d): len %d, aligned %v", m, len(nb), aligned(nb))
		}
		for i := range min(m, len(b)) {
			if nb[i] != byte(i) {
				t.Fatalf("Reallocate(%d) lost byte %d", m, i)
			}
		}
		b = nb
	}
	a.Free(b)
}

// TestFramePool: frame-sized buffers are reused as they were left (gRPC
// overwrites them whole); other sizes come from gRPC's default pool.
func TestFramePool(t *testing.T) {
	for _, n := range []int{frameBytes/4 + 1, frameBytes/2 + 1, 12345, frameBytes} {
		b := frames.Get(n)
		if len(*b) != n || cap(*b) != frameBytes {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		frames.Put(b)
	}
	for _, n := range []int{10, frameBytes / 4, frameBytes + 1, 1 << 20} {
		b := frames.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		frames.Put(b)
	}
}

// TestFramePoolTier: the sizes the frame pool hands out are exactly
// those for which gRPC's default pool hands out buffers of 16 KiB. Were
// the default pool to hand out such buffers for a size this pool leaves
// to it, every one would come back here on Put and never return there:
// the default pool would make a new buffer for every frame of that size.
func TestFramePoolTier(t *testing.T) {
	def := mem.DefaultBufferPool()
	for n := 1; n <= 2*frameBytes; n++ {
		b := def.Get(n)
		ours := n > frameBytes/4 && n <= frameBytes
		if (cap(*b) == frameBytes) != ours {
			t.Fatalf("the default pool's buffer for %d bytes has capacity %d; the frame pool hands out %d-byte buffers itself: %v", n, cap(*b), n, ours)
		}
		def.Put(b)
	}
}

func TestTransportSizes(t *testing.T) {
	const msg = 16 << 20
	for _, c := range []struct {
		tr                Transport
		maxMessage        int
		window, conn      int32
		readBuf, writeBuf int
	}{
		{Transport{}, msg, DefaultWindowBytes, DefaultConnWindowBytes, DefaultIOBufferBytes, DefaultIOBufferBytes},
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
