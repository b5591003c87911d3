package dlarrow

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/tensor"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
)

// closer is the Arrow allocator of a buffer that wraps an imported
// tensor: Arrow frees the buffer when its last reference is released, and
// freeing it closes the Foreign (the producer's deleter runs then).
type closer struct{ f dlpack.Foreign }

func (c closer) Allocate(int) []byte {
	panic("dlarrow: a buffer sharing a DLPack tensor cannot grow")
}
func (c closer) Reallocate(int, []byte) []byte {
	panic("dlarrow: a buffer sharing a DLPack tensor cannot grow")
}
func (c closer) Free([]byte) { c.f.Close() }

// ToArray wraps a compact row-major CPU tensor of int8..int64,
// uint8..uint64, float16, float32 or float64 as an Arrow array sharing its
// memory: a 1-d tensor becomes a primitive array, an (N, w) tensor a
// FixedSizeList<w> of length N, an (N, w1, w2, ...) tensor nested
// FixedSizeLists (widths 1 to 2^31-1: Arrow has no empty FixedSizeList). Read-only tensors are welcome (Arrow never writes).
//
// On success the array owns f: its memory.Buffer closes f (the producer's
// deleter runs) when the array's last reference is released, so Release
// the array and do not Close f. On error f stays the caller's. It fails
// with dlpack.ErrLayout for strided tensors (CopyToArray copies them),
// ErrType for other data types (bool tensors: CopyToArray packs them),
// dlpack.ErrShape for 0-d tensors and zero widths, and as dlpack.ReadOnlySlice otherwise
// (dlpack.ErrDevice for memory the CPU cannot read).
func ToArray(f dlpack.Foreign) (arrow.Array, error) {
	if err := checkShape(f); err != nil {
		return nil, err
	}
	dt, err := sharedType(f.DataType())
	if err != nil {
		return nil, err
	}
	if !f.IsContiguous() {
		return nil, &dlpack.FieldError{Field: "dl_tensor.strides", Value: f.Strides(), Err: dlpack.ErrLayout, Why: "Arrow arrays are compact; CopyToArray copies strided tensors"}
	}
	raw, err := tensorBytes(f)
	if err != nil {
		return nil, err
	}
	buf := memory.NewBufferWithAllocator(raw, closer{f})
	defer buf.Release()
	data := nest(array.NewData(dt, int(f.Len()), []*memory.Buffer{nil, buf}, nil, 0, 0), f.Shape())
	defer data.Release()
	return array.MakeFromData(data), nil
}

// checkShape refuses what Arrow cannot nest: a FixedSizeList's width
// must be between 1 and 2^31-1.
func checkShape(f dlpack.Foreign) error {
	if f.NDim() == 0 {
		return &dlpack.FieldError{Field: "dl_tensor.ndim", Value: 0, Err: dlpack.ErrShape, Why: "an Arrow array needs at least 1 dimension"}
	}
	for i, d := range f.Shape()[1:] {
		if d < 1 || d > math.MaxInt32 {
			return &dlpack.FieldError{Field: fmt.Sprintf("dl_tensor.shape[%d]", i+1), Value: d, Err: dlpack.ErrShape,
				Why: "a FixedSizeList width must be 1 to 2^31-1"}
		}
	}
	return nil
}

// nest wraps flat values in FixedSizeLists for shape[1:], innermost first,
// and returns the outermost; it consumes values' reference.
func nest(values arrow.ArrayData, shape []int64) arrow.ArrayData {
	for i := len(shape) - 1; i >= 1; i-- {
		w, n := shape[i], int(productOf(shape[:i]))
		list := array.NewData(arrow.FixedSizeListOf(int32(w), values.DataType()), n, []*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0)
		values.Release()
		values = list
	}
	return values
}

func productOf(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// tensorBytes is the memory of a compact CPU tensor, shared.
func tensorBytes(f dlpack.Foreign) ([]byte, error) {
	switch f.DataType() {
	case dlpack.Int8:
		return bytesOf[int8](f)
	case dlpack.Int16:
		return bytesOf[int16](f)
	case dlpack.Int32:
		return bytesOf[int32](f)
	case dlpack.Int64:
		return bytesOf[int64](f)
	case dlpack.Uint8:
		return bytesOf[uint8](f)
	case dlpack.Uint16:
		return bytesOf[uint16](f)
	case dlpack.Uint32:
		return bytesOf[uint32](f)
	case dlpack.Uint64:
		return bytesOf[uint64](f)
	case dlpack.Float16:
		return bytesOf[minifloat.Float16](f)
	case dlpack.Float32:
		return bytesOf[float32](f)
	case dlpack.Float64:
		return bytesOf[float64](f)
	}
	_, err := arrowType(f.DataType())
	return nil, err
}

func bytesOf[T dlpack.Element](f dlpack.Foreign) ([]byte, error) {
	xs, err := dlpack.ReadOnlySlice[T](f)
	if err != nil || len(xs) == 0 {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)*int(unsafe.Sizeof(xs[0]))), nil
}

func spanBytes[T dlpack.Element](f dlpack.Foreign) ([]byte, error) {
	xs, err := dlpack.ReadOnlySpan[T](f)
	if err != nil || len(xs) == 0 {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)*int(unsafe.Sizeof(xs[0]))), nil
}

// ToTensor wraps a CPU tensor of int8..int64, uint8..uint64, float32 or
// float64 (the types of package arrow/tensor) as an Arrow tensor sharing
// its memory; any strides that are zero or positive are kept (as byte
// strides). Ownership is as for ToArray: Release the tensor, do not Close
// f. Negative strides fail with dlpack.ErrLayout (CopyToArray copies).
func ToTensor(f dlpack.Foreign) (tensor.Interface, error) {
	var (
		raw []byte
		err error
	)
	switch f.DataType() {
	case dlpack.Int8:
		raw, err = spanBytes[int8](f)
	case dlpack.Int16:
		raw, err = spanBytes[int16](f)
	case dlpack.Int32:
		raw, err = spanBytes[int32](f)
	case dlpack.Int64:
		raw, err = spanBytes[int64](f)
	case dlpack.Uint8:
		raw, err = spanBytes[uint8](f)
	case dlpack.Uint16:
		raw, err = spanBytes[uint16](f)
	case dlpack.Uint32:
		raw, err = spanBytes[uint32](f)
	case dlpack.Uint64:
		raw, err = spanBytes[uint64](f)
	case dlpack.Float32:
		raw, err = spanBytes[float32](f)
	case dlpack.Float64:
		raw, err = spanBytes[float64](f)
	default:
		return nil, &dlpack.FieldError{Field: "dl_tensor.dtype", Value: f.DataType(), Err: ErrType,
			Why: "arrow/tensor holds int8..int64, uint8..uint64, float32 and float64"}
	}
	if err != nil {
		return nil, err
	}
	dt, _ := arrowType(f.DataType())
	size := int64(f.DataType().ItemSize())
	strides := f.Strides()
	for i := range strides {
		strides[i] *= size
	}
	buf := memory.NewBufferWithAllocator(raw, closer{f})
	defer buf.Release()
	data := array.NewData(dt, len(raw)/int(size), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	return tensor.New(data, f.Shape(), strides, nil), nil
}

// CopyToArray copies a CPU tensor of any layout (strided, broadcast,
// negative strides, read-only) into a new compact Arrow array allocated
// from mem, shaped as ToArray would share it; bool tensors become Arrow
// booleans (packed bits). f stays the caller's to close.
func CopyToArray(f dlpack.Foreign, mem memory.Allocator) (arrow.Array, error) {
	if err := checkShape(f); err != nil {
		return nil, err
	}
	dt, err := arrowType(f.DataType())
	if err != nil {
		return nil, err
	}
	n := int(f.Len())
	var buf *memory.Buffer
	switch f.DataType() {
	case dlpack.Bool:
		buf, err = copyBits(f, mem)
	case dlpack.Int8:
		buf, err = copyInto[int8](f, mem)
	case dlpack.Int16:
		buf, err = copyInto[int16](f, mem)
	case dlpack.Int32:
		buf, err = copyInto[int32](f, mem)
	case dlpack.Int64:
		buf, err = copyInto[int64](f, mem)
	case dlpack.Uint8:
		buf, err = copyInto[uint8](f, mem)
	case dlpack.Uint16:
		buf, err = copyInto[uint16](f, mem)
	case dlpack.Uint32:
		buf, err = copyInto[uint32](f, mem)
	case dlpack.Uint64:
		buf, err = copyInto[uint64](f, mem)
	case dlpack.Float16:
		buf, err = copyInto[minifloat.Float16](f, mem)
	case dlpack.Float32:
		buf, err = copyInto[float32](f, mem)
	case dlpack.Float64:
		buf, err = copyInto[float64](f, mem)
	}
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	data := nest(array.NewData(dt, n, []*memory.Buffer{nil, buf}, nil, 0, 0), f.Shape())
	defer data.Release()
	return array.MakeFromData(data), nil
}

func copyInto[T dlpack.Element](f dlpack.Foreign, mem memory.Allocator) (*memory.Buffer, error) {
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return nil, err
	}
	var z T
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(v.Len() * int(unsafe.Sizeof(z)))
	if v.Len() > 0 {
		dst := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf.Bytes()))), v.Len())
		if _, err := v.CopyTo(dst); err != nil {
			buf.Release()
			return nil, fmt.Errorf("dlarrow: %w", err)
		}
	}
	return buf, nil
}

func copyBits(f dlpack.Foreign, mem memory.Allocator) (*memory.Buffer, error) {
	v, err := dlpack.ViewOf[bool](f)
	if err != nil {
		return nil, err
	}
	bools := make([]bool, v.Len())
	if _, err := v.CopyTo(bools); err != nil {
		return nil, fmt.Errorf("dlarrow: %w", err)
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(bools)))))
	bits := buf.Bytes()
	clear(bits)
	for i, b := range bools {
		if b {
			bitutil.SetBit(bits, i)
		}
	}
	return buf, nil
}
