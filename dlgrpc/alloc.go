package dlgrpc

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/mem"
)

// Allocator allocates the bodies of received tensors. Its methods are
// those of arrow-go's memory.Allocator, so any Arrow allocator is one.
// Every buffer it returns must be aligned to Align bytes; its contents
// need not be cleared (every received body is written whole before it
// is read).
type Allocator interface {
	Allocate(size int) []byte
	Reallocate(size int, b []byte) []byte
	Free(b []byte)
}

// Align is the alignment of every received tensor's data that a Tensor
// shares: JAX aliases CPU memory only at 64 bytes, and Arrow aligns to
// 64 bytes too.
const Align = 64

// DefaultAllocator is the Allocator of options that leave it nil. A
// received body is copied once, from gRPC's frames into its buffer, and
// a fresh buffer of a large tensor is memory the kernel has to fault in
// (or the runtime to clear) page by page as that copy first touches it:
// for 256 MiB that cost more than the copy itself, and C++ allocators
// (pyarrow's) avoid it by reusing freed memory. Bodies under 1 MiB are
// fresh Go memory; larger ones are kept when freed (a tensor's last
// release) for the next body of their size class (eight classes per
// power of two, so a buffer is at most 12.5% larger than its body), in
// sync.Pools that the garbage collector empties when they go unused for
// two cycles.
var DefaultAllocator Allocator = bodies

// bodyAllocator is DefaultAllocator.
type bodyAllocator struct {
	classes sync.Map // size class -> *sync.Pool of *[]byte, 64-byte aligned
}

// pooledBodyBytes is the smallest body the allocator pools.
const pooledBodyBytes = 1 << 20

var bodies = &bodyAllocator{}

// bodyClass rounds n up to a size class: eight classes per power of two.
func bodyClass(n int) int {
	step := 1 << (bits.Len(uint(n-1)) - 4) // a sixteenth of the power of two at or above n (n >= 2^20)
	return (n + step - 1) / step * step
}

func (a *bodyAllocator) pool(class int) *sync.Pool {
	if p, ok := a.classes.Load(class); ok {
		return p.(*sync.Pool)
	}
	p, _ := a.classes.LoadOrStore(class, new(sync.Pool))
	return p.(*sync.Pool)
}

func (a *bodyAllocator) Allocate(n int) []byte {
	if n < pooledBodyBytes {
		return dlpack.AlignedSlice[byte](n)
	}
	class := bodyClass(n)
	if b, ok := a.pool(class).Get().(*[]byte); ok {
		return (*b)[:n]
	}
	raw := make([]byte, class+Align)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (Align - 1))
	return raw[off : off+n : off+class]
}

func (a *bodyAllocator) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) && (n < pooledBodyBytes) == (cap(b) < pooledBodyBytes) {
		return b[:n]
	}
	nb := a.Allocate(n)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *bodyAllocator) Free(b []byte) {
	if cap(b) < pooledBodyBytes || cap(b) != bodyClass(cap(b)) {
		return // fresh Go memory, which the collector frees
	}
	b = b[:cap(b)]
	a.pool(cap(b)).Put(&b)
}

// frameBytes is the largest HTTP/2 DATA frame gRPC sends and reads.
const frameBytes = 16 << 10

// framePool is the buffer pool of the services' gRPC connections. gRPC
// reads each DATA frame of a message into a buffer of its pool, and
// mem.DefaultBufferPool clears every buffer it hands out again: one more
// pass over every received byte, which gRPC then overwrites whole (it
// reads the frame into all of the buffer, or returns it on error). This
// pool hands out the buffers of frames above 4 KiB, up to 16 KiB, as
// they were left, each of 16 KiB (as the default pool's would be); other
// sizes go to the default pool. Every buffer of 16 KiB put back stays
// here, whichever pool it came from, so the range this pool hands out
// must be the whole of the default pool's 16 KiB tier: were it less, the
// default pool's buffers of that tier would drift here and never be
// handed out again, and the default pool would make new ones for every
// message (it did, when this pool began at 8 KiB: a call of 4 KiB cost
// 33 KB more of fresh memory).
type framePool struct{ frames sync.Pool }

var frames = &framePool{}

func (p *framePool) Get(n int) *[]byte {
	if n <= frameBytes/4 || n > frameBytes {
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
