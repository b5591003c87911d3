package dlpack

import (
	"strconv"
	"unsafe"
)

// Array is the plain Go tensor: a slice, the shape of its elements and
// their strides, like image.RGBA's Pix, Rect and Stride. It is a Source
// and a Producer: From takes it Go to Go, Produce (or its DLPack method)
// lends it to C, Python and Rust consumers without a copy, pinning Data
// and keeping the Array reachable until the last consumer is done.
//
// The fields are read at each export; changing them later does not change
// tensors already handed out. While a consumer holds the memory, Go must
// not write it unless both sides agreed to share writes.
type Array[T Element] struct {
	// Data holds the elements.
	Data []T
	// Shape and Strides (in elements; nil means compact row-major) give
	// the tensor's elements, from Data[Offset]. Strides may be zero or
	// negative.
	Shape   []int64
	Strides []int64
	Offset  int
	// ReadOnly makes every consumer's tensor read-only.
	ReadOnly bool
}

// NewArray returns a compact row-major Array of data with the given shape
// (nil: a 1-D shape of len(data); []int64{}: a 0-d tensor).
func NewArray[T Element](data []T, shape []int64) *Array[T] {
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	return &Array[T]{Data: data, Shape: shape}
}

// DescribeTensor implements Source.
func (a *Array[T]) DescribeTensor(d *Description) error {
	if a == nil {
		return nilProducer(a)
	}
	if a.Offset < 0 || a.Offset > len(a.Data) {
		return fieldErr(ErrShape, "Array.Offset", a.Offset, "outside Data (length "+strconv.Itoa(len(a.Data))+")")
	}
	var z T
	DescribeSlice(d, a.Data)
	d.Shape, d.Strides = a.Shape, a.Strides
	d.ByteOffset = uint64(a.Offset) * uint64(unsafe.Sizeof(z))
	d.ReadOnly = a.ReadOnly
	d.Owner = a
	return nil
}

// describeInto implements goArray.
func (a *Array[T]) describeInto(c *checked, dims []int64) (unsafe.Pointer, error) {
	if a == nil {
		return nil, nilProducer(a)
	}
	if a.Offset < 0 || a.Offset > len(a.Data) {
		return nil, fieldErr(ErrShape, "Array.Offset", a.Offset, "outside Data (length "+strconv.Itoa(len(a.Data))+")")
	}
	var z T
	size := unsafe.Sizeof(z)
	data := unsafe.Pointer(unsafe.SliceData(a.Data))
	c.dtype, c.device = DataTypeOf[T](), CPUDevice
	if a.Strides == nil && c.compactGeometry(uintptr(data), int64(len(a.Data)-a.Offset), uintptr(a.Offset)*size, a.Shape, a.ReadOnly, dims) {
		return data, nil
	}
	err := c.checkGeometry(uintptr(data), false, uintptr(len(a.Data))*size, uint64(a.Offset)*uint64(size), a.Shape, a.Strides, a.ReadOnly, dims)
	return data, err
}

// DLPackDevice implements Producer: the CPU.
func (a *Array[T]) DLPackDevice() Device { return CPUDevice }

// DLPack implements Producer through Produce.
func (a *Array[T]) DLPack(req Request) (Managed, error) { return Produce(a, req) }

// AlignedSlice returns a zeroed Go slice of n elements whose first element
// is 256-byte aligned: memory every known consumer shares rather than
// copies (JAX aliases CPU memory only when it is 64-byte aligned). It
// panics if n is negative, like make.
func AlignedSlice[T Element](n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	buf := make([]T, n+bufferAlign/size)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	off := int((bufferAlign-addr%bufferAlign)%bufferAlign) / size
	return buf[off : off+n : off+n]
}
