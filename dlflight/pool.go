package dlflight

import (
	"sync"

	"google.golang.org/grpc/mem"
)

// frameBytes is the largest HTTP/2 DATA frame gRPC sends and reads.
const frameBytes = 16 << 10

// framePool is the buffer pool of dlflight's gRPC connections. gRPC reads
// each DATA frame of a message into a buffer of its pool, and
// mem.DefaultBufferPool clears every buffer it hands out again: one more
// pass over every received byte, which gRPC then overwrites whole (it
// reads the frame into all of the buffer, or returns it on error). This
// pool hands out frame-sized buffers (8 to 16 KiB) as they were left;
// other sizes go to the default pool.
type framePool struct{ frames sync.Pool }

var frames = &framePool{}

func (p *framePool) Get(n int) *[]byte {
	if n <= frameBytes/2 || n > frameBytes {
		return mem.DefaultBufferPool().Get(n)
	}
	if b, ok := p.frames.Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, frameBytes)
	return &b
}

func (p *framePool) Put(b *[]byte) {
	if cap(*b) != frameBytes {
		mem.DefaultBufferPool().Put(b)
		return
	}
	p.frames.Put(b)
}
