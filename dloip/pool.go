package dloip

import (
	"math/bits"
	"sync"

	"github.com/godlpack/dlpack"
)

// Received tensors of poolMin bytes or more go into buffers reused once
// a Tensor and every export of it are released: fresh memory for every
// large tensor is faulted in page by page, and zeroed, during the one
// copy out of gRPC's frames, which cost more than the copy. Buffers come
// in power-of-two classes; the garbage collector empties the pools when
// they go unused (sync.Pool).
const poolMin = 1 << 20

var bodies [64]sync.Pool

// body is a pooled buffer: b[:n] is handed out.
type body struct {
	b     []byte
	class int
}

// getBody returns a 64-byte aligned buffer of n bytes whose contents are
// unspecified, and the function that gives it back (nil when n is below
// poolMin: the garbage collector frees it).
func getBody(n int) ([]byte, func()) {
	if n < poolMin {
		return dlpack.AlignedSlice[byte](n), nil
	}
	c := bits.Len(uint(n - 1))
	bd, _ := bodies[c].Get().(*body)
	if bd == nil {
		bd = &body{b: dlpack.AlignedSlice[byte](1 << c), class: c}
	}
	return bd.b[:n], func() { bodies[bd.class].Put(bd) }
}
