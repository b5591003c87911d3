package dlarrow

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/tensor"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/nilcheck"
)

// retainer is what Arrow arrays, Arrow tensors and mapped files share: a
// reference count.
type retainer interface {
	Retain()
	Release()
}

// Tensor is Arrow memory described as a DLPack tensor: a read-only CPU
// tensor sharing an array's values buffer (or an Arrow tensor's), as
// pyarrow's __dlpack__ does. It implements dlpack.Source and
// dlpack.Producer, so it goes wherever any producer goes: to C through
// dlpack.Produce, to Go through dlpack.From, to Python through pycapsule.
//
// Lifetimes are Arrow's reference counts: the constructor retains the
// array, Close drops that reference, and every export retains it again
// until its consumer's deleter runs (from any goroutine or C thread), so
// the buffer outlives both the Tensor and the array the caller holds.
// Exports may be made from many goroutines at once, but not while Close
// runs; after Close they fail with dlpack.ErrClosed, and those already
// made stay valid.
//
// The data is always marked read-only (Arrow buffers are immutable): a
// consumer that asks for a writable tensor, or for a legacy one (which
// cannot carry the flag), gets a copy unless it forbids copies.
type Tensor struct {
	refs     exportRef // the array or Arrow tensor (and a mapped file); also the Owner of every export
	buf      []byte    // the buffer the elements lie in
	offset   uint64    // bytes from buf[0] to the first element
	st       storage
	shape    []int64
	strides  []int64 // in elements; nil = compact row-major
	released atomic.Bool
	// copied: the data is a copy the package made (a column of a
	// compressed IPC file, decompressed), not the memory it describes
	copied bool
	// checked is the description, checked by dlpack at the first export
	// and handed out as it is by every later one.
	checked atomic.Pointer[dlpack.CheckedDescription]
	// pin pins buf, once, at the second export, for as long as the
	// Tensor is reachable (every export keeps it so, through its Owner, a
	// field of the Tensor); a cleanup unpins it when the Tensor is
	// collected. Later exports skip dlpack's pin and unpin of each
	// consumer. A Tensor exported once (Export) pins per export instead:
	// the cleanup would cost more than the pin.
	exports atomic.Int64
	pin     sync.Once
}

// pinBuffer pins the values buffer (a no-op for memory outside the Go
// heap: C allocators, mapped files) until the Tensor is unreachable.
func (t *Tensor) pinBuffer() {
	p := new(runtime.Pinner)
	p.Pin(unsafe.Pointer(unsafe.SliceData(t.buf)))
	runtime.AddCleanup(t, func(p *runtime.Pinner) { p.Unpin() }, p)
}

// FromArray describes arr as a tensor without copying: a 1-d tensor for
// int8..int64, uint8..uint64, float16, float32, float64 and the temporal
// types (date32/64, time32/64, timestamp, duration: their integer storage,
// see Unit); an (N, w) tensor for a FixedSizeList<w> of those, and an
// (N, w1, w2, ...) tensor for nested FixedSizeLists, an (N, shape...)
// tensor for Arrow's fixed_shape_tensor extension (see FromField). A
// sliced array gives a tensor starting at its offset.
//
// It refuses arrays with nulls at any level (ErrNulls, with the count;
// CopyFromArray replaces them), booleans (ErrBitPacked; CopyFromArray[bool] unpacks them),
// and every other type (ErrType). FromArray retains arr; call Close on
// the Tensor when no more exports are needed.
func FromArray(arr arrow.Array) (*Tensor, error) {
	if nilcheck.IsNil(arr) {
		return nil, nilArgument("array", arr)
	}
	if name, meta, storage, ok := extensionOf(arr); ok {
		return fromExtension(name, meta, storage)
	}
	l, err := describe(arr, "array", 0, arr.Len())
	if err != nil {
		return nil, err
	}
	arr.Retain()
	return &Tensor{refs: exportRef{ref: arr}, buf: l.buf, offset: uint64(l.first) * uint64(l.st.dt.ItemSize()), st: l.st,
		shape: append([]int64{int64(arr.Len())}, l.inner...)}, nil
}

// FromChunked describes each chunk of a chunked column as a tensor, in
// order, without copying (see FromArray). On error no Tensor is returned
// and nothing stays retained.
func FromChunked(c *arrow.Chunked) ([]*Tensor, error) {
	if c == nil {
		return nil, nilArgument("chunked", c)
	}
	ts := make([]*Tensor, 0, len(c.Chunks()))
	for i, ch := range c.Chunks() {
		t, err := FromArray(ch)
		if err != nil {
			for _, t := range ts {
				t.Close()
			}
			return nil, fmt.Errorf("dlarrow: chunk %d: %w", i, err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// FromTensor describes an Arrow tensor (package arrow/tensor) as an N-d
// DLPack tensor without copying; its byte strides become element strides.
// Date32 and Date64 tensors export their integer storage (see Unit). It
// retains t until Close, and every export retains it until its deleter.
func FromTensor(t tensor.Interface) (*Tensor, error) {
	if nilcheck.IsNil(t) {
		return nil, nilArgument("tensor", t)
	}
	st, err := storageOf(t.DataType())
	if err != nil {
		return nil, err
	}
	data := t.Data()
	size := int64(st.dt.ItemSize())
	shape := append([]int64(nil), t.Shape()...)
	strides := make([]int64, len(shape))
	for i, s := range t.Strides() {
		if s%size != 0 {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("tensor.strides[%d]", i), Value: s, Err: dlpack.ErrStrides,
				Why: fmt.Sprintf("not a multiple of the %d-byte element", size)}
		}
		strides[i] = s / size
	}
	vals := data.Buffers()[1]
	var buf []byte
	if vals != nil {
		buf = vals.Bytes()
	}
	first := int64(data.Offset())
	// every element must lie inside the buffer
	lo, hi, n := first, first, int64(1)
	for i, d := range shape {
		n *= d
		if d > 0 {
			if strides[i] < 0 {
				lo += (d - 1) * strides[i]
			} else {
				hi += (d - 1) * strides[i]
			}
		}
	}
	if n > 0 && (lo < 0 || (hi+1)*size > int64(len(buf))) {
		return nil, &dlpack.FieldError{Field: "tensor.data.buffers[1]", Value: len(buf), Err: ErrBuffer,
			Why: fmt.Sprintf("elements reach bytes [%d, %d)", lo*size, (hi+1)*size)}
	}
	t.Retain()
	return &Tensor{refs: exportRef{ref: t}, buf: buf, offset: uint64(first * size), st: st, shape: shape, strides: strides}, nil
}

// Copied reports whether the tensor's data is a copy made by this
// package rather than the memory it was made from: true for a column of a
// compressed record batch of an IPC file, which File.Column decompresses
// into new memory; false for a tensor sharing an array's buffer or a
// file's mapping. Exports of a copied tensor are not marked
// dlpack.FlagIsCopied: every consumer shares the one copy, and the flag
// says a consumer owns its data alone.
func (t *Tensor) Copied() bool { return t.copied }

// DataType is the DLPack data type of the elements (the integer storage
// for temporal types).
func (t *Tensor) DataType() dlpack.DataType { return t.st.dt }

// Shape returns a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape...) }

// Strides returns a copy of the strides in elements, or nil for a compact
// row-major tensor.
func (t *Tensor) Strides() []int64 { return append([]int64(nil), t.strides...) }

// Unit is the unit of a temporal type's integer storage, spelled as NumPy's
// datetime64 and timedelta64 units: "D" (days: date32), "ms" (date64),
// "s", "ms", "us" or "ns" (time32/64, timestamp, duration); "" for plain
// numbers. np.from_dlpack(t).view("datetime64[" + unit + "]") reads dates
// and timestamps (a timestamp's time zone is in its Arrow type).
func (t *Tensor) Unit() string { return t.st.unit }

// Close drops the Tensor's reference to its array (and file); exports
// keep their own. It is idempotent and returns nil.
func (t *Tensor) Close() error {
	if t.released.CompareAndSwap(false, true) {
		t.refs.ReleaseTensor()
	}
	return nil
}

// DLPackDevice is the CPU: arrow-go buffers are CPU memory.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack answers a consumer's request through dlpack.Produce.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(t, req) }

// DescribeTensor implements dlpack.Source: it retains the array (and the
// file) for the consumer; the consumer's release drops them. It fails with
// dlpack.ErrClosed after Close.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	if t.released.Load() {
		return &dlpack.FieldError{Field: "dlarrow.Tensor", Value: "released", Err: dlpack.ErrClosed}
	}
	t.refs.ref.Retain()
	if t.refs.keep != nil {
		t.refs.keep.Retain()
	}
	d.Owner = &t.refs
	if len(t.buf) > 0 && t.exports.Add(1) > 1 {
		t.pin.Do(t.pinBuffer)
		d.Pinned = true
	}
	if cd := t.checked.Load(); cd != nil {
		d.Checked = cd
		return nil
	}
	t.describe(d)
	if cd, err := dlpack.CheckDescription(d); err == nil {
		t.checked.Store(cd) // racing first exports store equal descriptions
	}
	return nil // a description that fails its check is refused by the consumer, naming the field
}

// describe fills d with the tensor's memory, shape and strides.
func (t *Tensor) describe(d *dlpack.Description) {
	// An empty array may have no values buffer at all: Data stays nil, and
	// Produce gives its tensor the package's aligned empty address.
	if len(t.buf) > 0 {
		d.Data = unsafe.Pointer(unsafe.SliceData(t.buf))
		d.Size = uintptr(len(t.buf))
		d.ByteOffset = t.offset
	}
	d.DType = t.st.dt
	d.Shape = t.shape
	d.Strides = t.strides
	d.Device = dlpack.CPUDevice
	d.ReadOnly = true
}

// exportRef is a set of references: the array (or Arrow tensor) and,
// for a file's column, the mapping. One value serves the Tensor and every
// export of it: the consumer calls ReleaseTensor exactly once per
// successful DescribeTensor (dlpack.Source's contract), and each call
// drops the references that export took.
type exportRef struct{ ref, keep retainer }

// ReleaseTensor implements dlpack.Releaser.
func (e *exportRef) ReleaseTensor() {
	e.ref.Release()
	if e.keep != nil {
		e.keep.Release()
	}
}

// layout is where the elements of an array (or of a range of it) lie.
type layout struct {
	st    storage
	inner []int64 // the shape below the first dimension
	buf   []byte  // the values buffer
	first int     // index in buf, in elements, of the first element
}

// describe finds the layout of the n elements of arr from element start.
func describe(arr arrow.Array, path string, start, n int) (layout, error) {
	if nulls := nullsIn(arr, start, n); nulls > 0 {
		return layout{}, &dlpack.FieldError{Field: path + ".null_count", Value: nulls, Err: ErrNulls,
			Why: "DLPack has no nulls; CopyFromArray makes a dense copy with a fill value"}
	}
	data := arr.Data()
	if fsl, ok := arr.(*array.FixedSizeList); ok {
		w := int(fsl.DataType().(*arrow.FixedSizeListType).Len())
		l, err := describe(fsl.ListValues(), path+".values", (data.Offset()+start)*w, n*w)
		if err != nil {
			return layout{}, err
		}
		l.inner = append([]int64{int64(w)}, l.inner...)
		return l, nil
	}
	return valuesOf(arr, path, start, n)
}

// valuesOf locates the n values of a primitive (or temporal) array from
// element start in its values buffer, without looking at nulls.
func valuesOf(arr arrow.Array, path string, start, n int) (layout, error) {
	st, err := storageOf(arr.DataType())
	if err != nil {
		if path != "array" {
			err.(*dlpack.FieldError).Field = path + ".type"
		}
		return layout{}, err
	}
	data := arr.Data()
	var buf []byte
	if bs := data.Buffers(); len(bs) > 1 && bs[1] != nil {
		buf = bs[1].Bytes()
	}
	first := data.Offset() + start
	if size := st.dt.ItemSize(); n > 0 && (first+n)*size > len(buf) {
		return layout{}, &dlpack.FieldError{Field: path + ".buffers[1]", Value: len(buf), Err: ErrBuffer,
			Why: fmt.Sprintf("%d elements from element %d need %d bytes", n, first, (first+n)*size)}
	}
	return layout{st: st, buf: buf, first: first}, nil
}

// nullsIn counts the nulls among n elements of arr from element start.
func nullsIn(arr arrow.Array, start, n int) int {
	if arr.NullN() == 0 || n == 0 {
		return 0
	}
	if start == 0 && n == arr.Len() {
		return arr.NullN()
	}
	bits := arr.NullBitmapBytes()
	if len(bits) == 0 {
		return 0
	}
	return n - bitutil.CountSetBits(bits, arr.Data().Offset()+start, n)
}

// nilArgument is the error of a function given nil, or a nil pointer,
// where it needs an Arrow value: dlpack.ErrNilPointer naming the argument.
func nilArgument(name string, v any) error {
	return &dlpack.FieldError{Field: name, Value: fmt.Sprintf("%T(nil)", v), Err: dlpack.ErrNilPointer}
}
