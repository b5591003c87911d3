package dlpack

import (
	"fmt"
	"iter"
	"unsafe"
)

// hostPointer checks that f can be viewed from Go as elements of type T
// and returns the first element.
func hostPointer[T Element](f Foreign, compact, writable bool) (*foreignState, unsafe.Pointer, error) {
	s := f.live()
	if s == nil {
		return nil, nil, ErrClosed
	}
	c := &s.c
	if !s.hostOK {
		return nil, nil, fieldErr(ErrDevice, "dl_tensor.device", c.device, "the CPU cannot read this memory (AllowHostMemory permits CUDAHost, ROCMHost, TPUHost, CUDAManaged)")
	}
	if want := DataTypeOf[T](); c.dtype != want {
		return nil, nil, fieldErr(ErrTypeMismatch, "dl_tensor.dtype", c.dtype, "viewed as "+want.String())
	}
	if compact && !c.contiguous {
		return nil, nil, fieldErr(ErrLayout, "dl_tensor.strides", clone(c.strides), "not compact row-major; use ViewOf")
	}
	if writable && !c.writable {
		why := "the producer set READ_ONLY"
		if c.legacy {
			why = "legacy tensors are read-only unless imported with AssumeWritable"
		}
		return nil, nil, fieldErr(ErrReadOnly, "flags", c.flags, why)
	}
	if c.numel == 0 {
		return s, nil, nil
	}
	var p unsafe.Pointer
	if s.goBase != nil {
		p = unsafe.Add(s.goBase, s.goOff)
	} else {
		p = *(*unsafe.Pointer)(unsafe.Pointer(&c.data))
	}
	var z T
	if uintptr(p)%unsafe.Alignof(z) != 0 {
		return nil, nil, fieldErr(ErrAlignment, "dl_tensor.data", c.data, fmt.Sprintf("%v needs %d-byte alignment", DataTypeOf[T](), unsafe.Alignof(z)))
	}
	return s, p, nil
}

// Slice returns the elements of a compact row-major CPU tensor as a
// writable Go slice sharing the producer's memory. It fails with ErrReadOnly
// for read-only tensors (use ReadOnlySlice), ErrLayout for strided ones (use
// ViewOf), ErrTypeMismatch unless T matches the data type, ErrDevice for
// memory the CPU cannot read, ErrClosed after Close.
//
// The slice is valid until the tensor is closed; it does not keep the
// Foreign alive, so keep the Foreign reachable while using it.
func Slice[T Element](f Foreign) ([]T, error) {
	s, p, err := hostPointer[T](f, true, true)
	if err != nil || p == nil {
		return nil, err
	}
	return unsafe.Slice((*T)(p), s.c.numel), nil
}

// ReadOnlySlice is Slice for tensors that may be read-only: the caller
// promises not to write through the returned slice (Go has no read-only
// slices). Prefer Slice when the data must be writable.
func ReadOnlySlice[T Element](f Foreign) ([]T, error) {
	s, p, err := hostPointer[T](f, true, false)
	if err != nil || p == nil {
		return nil, err
	}
	return unsafe.Slice((*T)(p), s.c.numel), nil
}

// Span returns, for a CPU tensor whose strides are all zero or positive,
// the elements from the first (index 0 in every dimension) to the last, as
// a writable slice sharing the producer's memory. Element (i, j, ...) is at
// i*Stride(0) + j*Stride(1) + ...; elements between them belong to the
// producer's buffer and may be outside the tensor. This is the layout of
// BLAS-style matrices (gonum's RawMatrix). It fails like Slice, with
// ErrLayout for negative strides.
func Span[T Element](f Foreign) ([]T, error) { return span[T](f, true) }

// ReadOnlySpan is Span for tensors that may be read-only: the caller
// promises not to write through the returned slice.
func ReadOnlySpan[T Element](f Foreign) ([]T, error) { return span[T](f, false) }

func span[T Element](f Foreign, writable bool) ([]T, error) {
	s, p, err := hostPointer[T](f, false, writable)
	if err != nil || p == nil {
		return nil, err
	}
	if s.c.minOff < 0 {
		return nil, fieldErr(ErrLayout, "dl_tensor.strides", clone(s.c.strides), "negative strides have no span; use ViewOf")
	}
	return unsafe.Slice((*T)(p), s.c.maxOff+1), nil
}

// View is a typed view of a CPU tensor with any strides, including zero
// (broadcast) and negative ones. It holds the Foreign, which it keeps
// alive, and checks on every access that the tensor is still open.
// Indexes out of range are programming errors and panic, like slice
// indexes.
type View[T Element] struct {
	f        Foreign
	base     unsafe.Pointer // first element (index 0 in every dimension)
	shape    []int64
	strides  []int64 // in bytes
	numel    int64
	writable bool
}

// ViewOf returns a strided view of f. It fails like Slice, except that any
// layout is accepted and read-only tensors give a view whose Set fails.
func ViewOf[T Element](f Foreign) (View[T], error) {
	s, p, err := hostPointer[T](f, false, false)
	if err != nil {
		return View[T]{}, err
	}
	var z T
	n := s.c.ndim
	dims := make([]int64, 2*n)
	copy(dims, s.c.shape)
	for i, st := range s.c.strides {
		dims[n+i] = st * int64(unsafe.Sizeof(z)) // cannot overflow: checked by the extent
	}
	return View[T]{f: f, base: p, shape: dims[:n:n], strides: dims[n:], numel: s.c.numel, writable: s.c.writable}, nil
}

// Foreign returns the tensor the view belongs to.
func (v View[T]) Foreign() Foreign { return v.f }

// NDim returns the number of dimensions.
func (v View[T]) NDim() int { return len(v.shape) }

// Shape returns a copy of the shape.
func (v View[T]) Shape() []int64 { return append([]int64{}, v.shape...) }

// Len returns the number of elements.
func (v View[T]) Len() int { return int(v.numel) }

// Writable reports whether Set may write.
func (v View[T]) Writable() bool { return v.writable }

func (v View[T]) addr(idx []int) unsafe.Pointer {
	if len(idx) != len(v.shape) {
		panic(fmt.Sprintf("dlpack: %d indexes for a %d-dimensional view", len(idx), len(v.shape)))
	}
	off := int64(0)
	for i, x := range idx {
		if x < 0 || int64(x) >= v.shape[i] {
			panic(fmt.Sprintf("dlpack: index %d out of range [0, %d) in dimension %d", x, v.shape[i], i))
		}
		off += int64(x) * v.strides[i]
	}
	return unsafe.Add(v.base, off)
}

// At returns the element at the given index, one per dimension. It returns
// ErrClosed once the tensor is closed.
func (v View[T]) At(idx ...int) (T, error) {
	p := v.addr(idx)
	if v.f.live() == nil {
		var z T
		return z, ErrClosed
	}
	return *(*T)(p), nil
}

// Set stores x at the given index. It returns ErrReadOnly for read-only
// tensors and ErrClosed once the tensor is closed.
func (v View[T]) Set(x T, idx ...int) error {
	p := v.addr(idx)
	if !v.writable {
		return ErrReadOnly
	}
	if v.f.live() == nil {
		return ErrClosed
	}
	*(*T)(p) = x
	return nil
}

// All yields every element in row-major order with its flat row-major
// index. It checks once, at the start, that the tensor is open, and yields
// nothing if not; closing the tensor during the iteration is a data race.
func (v View[T]) All() iter.Seq2[int, T] {
	return func(yield func(int, T) bool) {
		if v.numel == 0 || v.f.live() == nil {
			return
		}
		n := len(v.shape)
		if n == 0 {
			yield(0, *(*T)(v.base))
			return
		}
		// Offsets are kept as integers and turned into pointers only to
		// read an element, so no pointer ever leaves the tensor's memory.
		inner, step := int(v.shape[n-1]), v.strides[n-1]
		var idx [MaxNDim]int64
		row := int64(0)
		k := 0
		for {
			off := row
			for j := 0; j < inner; j++ {
				if !yield(k, *(*T)(unsafe.Add(v.base, off))) {
					return
				}
				k++
				off += step
			}
			d := n - 2
			for ; d >= 0; d-- {
				idx[d]++
				row += v.strides[d]
				if idx[d] < v.shape[d] {
					break
				}
				row -= v.strides[d] * v.shape[d]
				idx[d] = 0
			}
			if d < 0 {
				return
			}
		}
	}
}

// CopyTo copies the elements in row-major order into dst, which must hold
// Len elements, and returns how many it copied.
func (v View[T]) CopyTo(dst []T) (int, error) {
	if v.f.live() == nil {
		return 0, ErrClosed
	}
	if len(dst) < int(v.numel) {
		return 0, fmt.Errorf("%w: CopyTo needs %d elements, dst has %d", ErrShape, v.numel, len(dst))
	}
	for i, x := range v.All() {
		dst[i] = x
	}
	return int(v.numel), nil
}
