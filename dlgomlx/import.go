package dlgomlx

import (
	"errors"
	"reflect"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// ToTensor makes p's tensor a GoMLX tensor on backend (nil: a local
// tensor, for any backend), ready to be an input of a graph the backend
// can execute for its element type (simplego, for one, executes no
// float16 graphs: such a tensor can be held and handed on, not computed on).
//
// GoMLX v0.26.0 cannot adopt memory it did not allocate: every tensor
// owns a Go slice GoMLX made (FromShape, FromFlatDataAndDimensions and
// simplego's BufferFromFlatData all copy, NewSharedBuffer allocates). So
// ToTensor shares only when p is a FromTensor export, whose GoMLX tensor
// comes back itself (unless it was finalized or waits for FinalizeAll:
// then ToTensor fails with ErrTensor, as FromTensor does); any other
// producer is copied once, straight into the memory the graph will read:
// a shared buffer of backend when it has them (simplego), so executing
// the graph copies nothing more; an upload
// to the device otherwise (a second, staging copy first when the
// producer's memory is strided or misaligned for the element type). Each
// copy is counted in ReadStats. The tensor taken from p is released
// before ToTensor returns; p stays the caller's.
//
// Strided producers (transposed, broadcast, negative strides) are copied
// into GoMLX's row-major layout. Bool elements other than 0 and 1 become
// true. It fails with dlpack.ErrDataType for element types GoMLX lacks
// and dlpack.ErrDevice for memory the CPU cannot read.
func ToTensor(p dlpack.Producer, backend backends.Backend) (*tensors.Tensor, error) {
	if x, ok := p.(*Tensor); ok && x != nil && !x.copied && exports.usable(x.src) {
		stats.shared.Add(1)
		return x.src, nil
	}
	return CopyToTensor(p, backend)
}

// CopyToTensor is ToTensor that always copies, a FromTensor export
// included: the result shares nothing with p.
func CopyToTensor(p dlpack.Producer, backend backends.Backend) (*tensors.Tensor, error) {
	if p == nil {
		return nil, &dlpack.FieldError{Field: "producer", Value: "nil", Err: dlpack.ErrNilPointer}
	}
	f, err := dlpack.From(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dt, ok := DType(f.DataType())
	if !ok {
		return nil, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: f.DataType(), Err: dlpack.ErrDataType, Why: "GoMLX has no such dtype"}
	}
	if f.Device() != dlpack.CPUDevice {
		return nil, &dlpack.FieldError{Field: "dl_tensor.device", Value: f.Device(), Err: dlpack.ErrDevice, Why: "the bridge reads host memory only"}
	}
	dims := make([]int, f.NDim())
	for i := range dims {
		dims[i] = int(f.Dim(i))
	}
	shape := shapes.Make(dt, dims...)
	src, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		return nil, err
	}
	c := elements{src: src, first: first, shape: f.Shape(), strides: f.Strides(),
		item: f.DataType().ItemSize(), contiguous: f.IsContiguous(), bool: f.DataType() == dlpack.Bool}
	switch {
	case backend == nil:
		t := tensors.FromShape(shape)
		if err := t.MutableFlatData(func(flat any) { c.copyTo(flat) }); err != nil {
			return nil, err
		}
		return t, nil
	case backend.HasSharedBuffers():
		buf, flat, err := backend.NewSharedBuffer(0, shape)
		if err != nil {
			return nil, err
		}
		c.copyTo(flat)
		return adopt(backend, buf)
	}
	// An accelerator: upload from the producer's memory when GoMLX can
	// read it as a Go slice, else from a compact staging copy.
	n := shape.Size()
	var flat any
	if c.contiguous && !c.bool && n > 0 && uintptr(unsafe.Pointer(&src[first]))%uintptr(dt.GoType().Align()) == 0 {
		flat = reflect.SliceAt(dt.GoType(), unsafe.Pointer(&src[first]), n).Interface()
	} else {
		flat = reflect.MakeSlice(reflect.SliceOf(dt.GoType()), n, n).Interface()
		c.copyTo(flat)
	}
	buf, err := backend.BufferFromFlatData(0, flat, shape)
	if err != nil {
		return nil, err
	}
	_, nbytes := flatBytes(flat)
	countCopy(nbytes)
	return adopt(backend, buf)
}

// adopt makes a backend buffer a tensor, finalizing the buffer if that fails.
func adopt(backend backends.Backend, buf backends.Buffer) (*tensors.Tensor, error) {
	t, err := tensors.FromBuffer(backend, buf)
	if err != nil {
		return nil, errors.Join(err, backend.BufferFinalize(buf))
	}
	return t, nil
}

// elements is a CPU tensor's elements as bytes, to copy into GoMLX's
// row-major layout.
type elements struct {
	src            []byte // from the lowest byte of any element to the highest
	first          int    // index in src of element (0, 0, ...)
	shape, strides []int64
	item           int
	contiguous     bool
	bool           bool // normalise bytes to 0 and 1
}

// copyTo copies the elements into flat, a Go slice of their GoMLX type
// and count, and counts the copy.
func (c *elements) copyTo(flat any) {
	p, n := flatBytes(flat)
	if n == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(p), n)
	if c.contiguous {
		copy(dst, c.src[c.first:c.first+int(n)])
	} else {
		c.walk(dst)
	}
	if c.bool {
		for i, b := range dst {
			if b > 1 {
				dst[i] = 1
			}
		}
	}
	countCopy(n)
}

// walk copies a strided tensor in row-major order, a run of the last
// dimension at a time when its elements are adjacent.
func (c *elements) walk(dst []byte) {
	nd := len(c.shape)
	item := int64(c.item)
	last := c.shape[nd-1]
	runBytes := last * item
	adjacent := c.strides[nd-1] == 1
	idx := make([]int64, nd-1)
	out := int64(0)
	for {
		off := int64(c.first)
		for i, j := range idx {
			off += j * c.strides[i] * item
		}
		if adjacent {
			copy(dst[out:out+runBytes], c.src[off:off+runBytes])
			out += runBytes
		} else {
			st := c.strides[nd-1] * item
			for k := int64(0); k < last; k++ {
				copy(dst[out:out+item], c.src[off+k*st:off+k*st+item])
				out += item
			}
		}
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < c.shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}
