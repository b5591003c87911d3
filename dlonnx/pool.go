//go:build cgo

package dlonnx

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Reshape gives a Tensor that owns its memory (NewOutput, CopyToValue, a
// Pool) a new shape that fits in the memory it has, without allocating
// or zeroing anything: pass it to RunInto again and ONNX Runtime writes
// every element of the new shape. It fails with dlpack.ErrShape for a
// shape that does not fit (or a 0-d or negative one),
// dlpack.ErrRequirement for a Tensor sharing a producer's memory
// (ToValue), and dlpack.ErrClosed after Destroy. Like Run, Reshape must
// be ordered with the runs and with handing the Tensor to consumers;
// consumers holding it keep the shape they were given.
func (t *Tensor) Reshape(shape []int64) error {
	s := t.s
	if !s.copied {
		return fmt.Errorf("dlonnx: Reshape: the Tensor shares its producer's memory (ToValue): %w", dlpack.ErrRequirement)
	}
	if !s.owned.Load() {
		return fmt.Errorf("dlonnx: Reshape after Destroy: %w", dlpack.ErrClosed)
	}
	if err := checkShape(shape); err != nil {
		return err
	}
	nbytes, err := byteSize(s.dtype, shape)
	if err != nil {
		return err
	}
	if nbytes > s.capacity {
		return &dlpack.FieldError{Field: "shape", Value: shape, Err: dlpack.ErrShape,
			Why: fmt.Sprintf("%d bytes do not fit in the Tensor's %d", nbytes, s.capacity)}
	}
	k, _ := kindFor(s.dtype)
	v, raw, err := s.makeValues(k, shape, nbytes)
	if err != nil {
		return err
	}
	oldV, oldRaw := s.value, s.rawv.Swap((*byte)(raw))
	s.value, t.customData = v, v
	s.shape, s.nbytes = append([]int64(nil), shape...), nbytes
	oldV.Destroy()
	releaseRawValue(unsafe.Pointer(oldRaw))
	return nil
}

// byteSize is the size of a compact tensor of dt and shape, checked for
// negative dimensions and overflow.
func byteSize(dt dlpack.DataType, shape []int64) (uintptr, error) {
	n := uint64(dt.Bits) / 8
	for i, d := range shape {
		if d < 0 {
			return 0, &dlpack.FieldError{Field: fmt.Sprintf("shape[%d]", i), Value: d, Err: dlpack.ErrShape, Why: "negative dimension"}
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<48 {
			return 0, &dlpack.FieldError{Field: "shape", Value: shape, Err: dlpack.ErrOverflow}
		}
		n = lo
	}
	return uintptr(n), nil
}

// Pool hands out output Tensors (for RunInto) over C buffers it keeps:
// when a Tensor's last holder lets go (Destroy and every DLPack consumer),
// its buffer goes back to the pool instead of being freed, kept by
// element type and size class (its byte size rounded up to a power of
// two). A loop of runs whose output shapes vary therefore allocates no
// buffer once each class it uses has one, and nothing is zeroed after a
// buffer's first use: ONNX Runtime writes every element of an output.
//
// A Pool is safe for concurrent use. Close frees the idle buffers; the
// ones in use are freed when their Tensors are done.
type Pool struct {
	mu     sync.Mutex
	idle   map[poolKey][]poolBuf
	closed bool
	made   int // buffers allocated, for tests
}

type poolKey struct {
	dt    dlpack.DataType
	class uintptr
}

type poolBuf struct {
	data  unsafe.Pointer
	close func() error
}

// minClass is the smallest buffer a Pool makes.
const minClass = 256

// NewPool returns an empty Pool.
func NewPool() *Pool { return &Pool{idle: map[poolKey][]poolBuf{}} }

// Get returns an output Tensor of type dt and the given shape over a
// buffer of the pool (made when none of its class is idle); its contents
// are whatever the buffer last held. Destroy it (and release its DLPack
// consumers) to give the buffer back. It fails like NewOutput.
func (p *Pool) Get(dt dlpack.DataType, shape []int64) (*Tensor, error) {
	k, err := kindFor(dt)
	if err != nil {
		return nil, err
	}
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	nbytes, err := byteSize(dt, shape)
	if err != nil {
		return nil, err
	}
	class := uintptr(minClass)
	if nbytes > minClass {
		class = uintptr(1) << bits.Len64(uint64(nbytes-1))
	}
	key := poolKey{dt, class}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("dlonnx: Pool.Get after Close: %w", dlpack.ErrClosed)
	}
	var b poolBuf
	if free := p.idle[key]; len(free) > 0 {
		b = free[len(free)-1]
		p.idle[key] = free[:len(free)-1]
	}
	p.mu.Unlock()
	if b.data == nil {
		buf, err := dlpack.NewBuffer[byte]([]int64{int64(class)})
		if err != nil {
			return nil, err
		}
		b = poolBuf{unsafe.Pointer(unsafe.SliceData(buf.Data())), buf.Close}
		p.mu.Lock()
		p.made++
		p.mu.Unlock()
	}
	t, err := newTensor(k, dt, append([]int64(nil), shape...), b.data, nbytes, func() error { p.put(key, b); return nil }, true)
	if err != nil {
		return nil, err
	}
	t.s.capacity = class
	return t, nil
}

func (p *Pool) put(key poolKey, b poolBuf) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		b.close()
		return
	}
	p.idle[key] = append(p.idle[key], b)
	p.mu.Unlock()
}

// Close frees the idle buffers and makes later Gets fail; buffers in use
// are freed when their Tensors are done. Idempotent; returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, bs := range idle {
		for _, b := range bs {
			b.close()
		}
	}
	return nil
}

// Buffers reports how many buffers the pool has allocated so far.
func (p *Pool) Buffers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made
}
