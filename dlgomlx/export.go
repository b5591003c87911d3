package dlgomlx

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// ErrTensor is wrapped by the errors about the GoMLX tensor itself: nil,
// finalized, a tuple, or a dtype the bridge does not carry (that one also
// wraps dlpack.ErrDataType).
var ErrTensor = errors.New("dlgomlx: unusable GoMLX tensor")

// Tensor is a GoMLX tensor as a DLPack producer: a dlpack.Source and a
// dlpack.Producer, so dlpack.From (Go to Go), dlpack.Produce (C, Rust) and
// the pycapsule helpers (NumPy, JAX, PyTorch) take it. It describes one
// compact row-major CPU buffer: the GoMLX tensor's own memory (FromTensor)
// or a copy that belongs to the Tensor alone (CopyFromTensor, and
// FromTensor of a tensor that lives only on an accelerator).
//
// Shared memory is handed out read-only (FlagReadOnly): GoMLX's contract
// for ConstFlatData is that the data is not changed behind its back.
// Copies are writable and carry FlagIsCopied on versioned tensors.
//
// The Tensor keeps the memory it describes reachable until the last
// consumer releases it, whatever happens to the GoMLX tensor meanwhile;
// see the package documentation for what GoMLX may do to that memory.
type Tensor struct {
	src    *tensors.Tensor
	flat   any // the Go slice that holds the elements (keeps them reachable)
	data   unsafe.Pointer
	size   uintptr
	dtype  dlpack.DataType
	shape  []int64
	copied bool
}

// Stats counts what the bridge shared and what it copied, since the
// process started, both ways. Each field is read atomically.
type Stats struct {
	// Shared counts tensors passed without copying elements: FromTensor
	// of a tensor whose memory the CPU holds, and ToTensor of a
	// FromTensor export (the GoMLX tensor itself comes back).
	Shared int64
	// Copies counts element copies made by the bridge: CopyFromTensor,
	// FromTensor of an accelerator-only tensor (GoMLX's own transfer),
	// ToTensor and CopyToTensor of any other producer; two for an upload
	// to an accelerator from memory that first had to be made compact.
	// An empty tensor copies nothing.
	Copies int64
	// CopiedBytes is the number of bytes those copies wrote.
	CopiedBytes int64
}

var stats struct{ shared, copies, bytes atomic.Int64 }

// ReadStats returns the bridge's counters.
func ReadStats() Stats {
	return Stats{Shared: stats.shared.Load(), Copies: stats.copies.Load(), CopiedBytes: stats.bytes.Load()}
}

func countCopy(n uintptr) {
	stats.copies.Add(1)
	stats.bytes.Add(int64(n))
}

// FromTensor hands out t's memory without copying when the CPU holds it:
// a local tensor (made from Go data, or brought to the host) shares its
// flat slice; a tensor in a buffer of a backend with shared buffers
// (simplego's inputs and results) shares that buffer, as t.ConstFlatData
// does. A tensor that lives only on an accelerator is brought to the host
// by GoMLX's own transfer (Backend.BufferToFlatData) into memory of the
// returned Tensor, which then counts as a copy (Copied, FlagIsCopied); t
// is left as it was.
//
// While exports are outstanding, finalize t with this package's
// FinalizeAll, which waits for them: GoMLX's own FinalizeAll or a
// donation would give a backend buffer back for reuse under the consumer
// (the package documentation says when).
func FromTensor(t *tensors.Tensor) (*Tensor, error) {
	x, err := newTensor(t)
	if err != nil {
		return nil, err
	}
	defer exports.done(t)
	if hostResident(t) {
		if err := t.ConstFlatData(func(flat any) { x.setFlat(flat) }); err != nil {
			return nil, &dlpack.FieldError{Field: "tensor", Value: t.Shape(), Err: ErrTensor, Why: err.Error()}
		}
		stats.shared.Add(1)
		return x, nil
	}
	if err := x.transfer(t); err != nil {
		return nil, err
	}
	return x, nil
}

// CopyFromTensor copies t's elements into new 256-byte aligned Go memory
// that belongs to the returned Tensor alone: consumers may write it, it
// carries FlagIsCopied, and t may be finalized or donated at once.
func CopyFromTensor(t *tensors.Tensor) (*Tensor, error) {
	x, err := newTensor(t)
	if err != nil {
		return nil, err
	}
	defer exports.done(t)
	if !hostResident(t) {
		if err := x.transfer(t); err != nil {
			return nil, err
		}
		return x, nil
	}
	mem := x.alloc()
	err = t.ConstFlatData(func(flat any) {
		p, n := flatBytes(flat)
		if n > 0 {
			copy(mem, unsafe.Slice((*byte)(p), n))
		}
	})
	if err != nil {
		return nil, &dlpack.FieldError{Field: "tensor", Value: t.Shape(), Err: ErrTensor, Why: err.Error()}
	}
	countCopy(x.size)
	return x, nil
}

// newTensor checks t and returns a Tensor with its type and shape. Unless
// it fails, t is held as one export until the caller calls
// exports.done(t), so that FinalizeAll cannot finalize t while the
// caller reads it (GoMLX's own accessors panic on a finalized tensor).
func newTensor(t *tensors.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, &dlpack.FieldError{Field: "tensor", Value: "nil", Err: ErrTensor}
	}
	if err := exports.add(t); err != nil {
		return nil, err
	}
	x, err := describe(t)
	if err != nil {
		exports.done(t)
	}
	return x, err
}

func describe(t *tensors.Tensor) (*Tensor, error) {
	if err := t.CheckValid(); err != nil {
		return nil, &dlpack.FieldError{Field: "tensor", Value: "finalized", Err: ErrTensor, Why: err.Error()}
	}
	shape := t.Shape()
	if shape.IsTuple() {
		return nil, &dlpack.FieldError{Field: "tensor.shape", Value: shape, Err: ErrTensor, Why: "a tuple is not a tensor"}
	}
	dt, ok := DataType(shape.DType)
	if !ok {
		return nil, &dlpack.FieldError{Field: "tensor.dtype", Value: shape.DType, Err: errors.Join(ErrTensor, dlpack.ErrDataType),
			Why: "GoMLX has no Go storage for it, or DLPack no code"}
	}
	x := &Tensor{src: t, dtype: dt, shape: make([]int64, shape.Rank())}
	for i, d := range shape.Dimensions {
		x.shape[i] = int64(d)
	}
	return x, nil
}

// hostResident reports whether t's elements are in memory the CPU reads
// without a transfer: local storage, or a backend's shared buffer.
func hostResident(t *tensors.Tensor) bool {
	if t.IsLocal() {
		return true
	}
	b, err := t.Backend()
	return err == nil && b.HasSharedBuffers()
}

func (x *Tensor) setFlat(flat any) {
	x.flat = flat
	x.data, x.size = flatBytes(flat)
}

// alloc gives x new aligned memory for its elements and returns it.
func (x *Tensor) alloc() []byte {
	n := uintptr(x.dtype.ItemSize())
	for _, d := range x.shape {
		n *= uintptr(d)
	}
	mem := dlpack.AlignedSlice[byte](int(n))
	x.flat, x.size, x.copied = mem, n, true
	if n > 0 {
		x.data = unsafe.Pointer(unsafe.SliceData(mem))
	}
	return mem
}

// transfer brings an accelerator-only tensor to the host by GoMLX's own
// transfer, straight into x's memory: one copy, and t keeps no local copy.
func (x *Tensor) transfer(t *tensors.Tensor) error {
	fail := func(err error) error {
		return &dlpack.FieldError{Field: "tensor", Value: t.Shape(), Err: ErrTensor, Why: "bringing it to the host: " + err.Error()}
	}
	b, err := t.Backend()
	if err != nil {
		return fail(err)
	}
	dev, err := t.Device()
	if err != nil {
		return fail(err)
	}
	buf, err := t.Buffer(b, dev)
	if err != nil {
		return fail(err)
	}
	x.alloc()
	n := t.Shape().Size()
	if n > 0 {
		flat := reflect.SliceAt(t.DType().GoType(), x.data, n).Interface()
		if err := b.BufferToFlatData(buf, flat); err != nil {
			return fail(err)
		}
	}
	countCopy(x.size)
	return nil
}

// flatBytes returns the address and byte length of the elements of a Go
// slice (nil for an empty one).
func flatBytes(flat any) (unsafe.Pointer, uintptr) {
	v := reflect.ValueOf(flat)
	if v.Len() == 0 {
		return nil, 0
	}
	return v.UnsafePointer(), uintptr(v.Len()) * v.Type().Elem().Size()
}

// GoMLX returns the GoMLX tensor the Tensor was made from.
func (x *Tensor) GoMLX() *tensors.Tensor { return x.src }

// Copied reports whether the Tensor holds its own copy of the elements
// (CopyFromTensor, or FromTensor of an accelerator-only tensor).
func (x *Tensor) Copied() bool { return x.copied }

// Shape returns the tensor's dimensions.
func (x *Tensor) Shape() []int64 { return append([]int64(nil), x.shape...) }

// DataType returns the tensor's DLPack element type.
func (x *Tensor) DataType() dlpack.DataType { return x.dtype }

// DescribeTensor implements dlpack.Source: compact row-major CPU memory,
// read-only when shared. A Tensor that shares the memory of a GoMLX
// tensor that has since been finalized describes nothing more (ErrTensor):
// GoMLX may have given that memory to another tensor.
func (x *Tensor) DescribeTensor(d *dlpack.Description) error {
	if x == nil {
		return errNilTensor
	}
	if !x.copied {
		if err := exports.add(x.src); err != nil {
			return err
		}
	}
	d.Data, d.Size, d.DType = x.data, x.size, x.dtype
	d.Shape = x.shape
	d.Device = dlpack.CPUDevice
	d.ReadOnly = !x.copied
	d.Owner = (*owner)(x)
	return nil
}

// DLPackDevice implements dlpack.Producer: the memory is the host's.
func (x *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer with dlpack.Produce; a versioned
// tensor of a Tensor's own copy carries FlagIsCopied.
func (x *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if x == nil {
		return dlpack.Managed{}, errNilTensor
	}
	m, err := dlpack.Produce(x, req)
	if err == nil && x.copied && m.Versioned != nil {
		m.Versioned.Flags |= dlpack.FlagIsCopied
	}
	return m, err
}

// errNilTensor is the error of a nil *Tensor used as a producer.
var errNilTensor = &dlpack.FieldError{Field: "producer", Value: "(*dlgomlx.Tensor)(nil)", Err: dlpack.ErrNilPointer}

// owner is a Tensor in the role of a description's Owner: its
// ReleaseTensor is the consumer's, not the user's.
type owner Tensor

// ReleaseTensor implements dlpack.Releaser: one consumer of a described
// tensor is done.
func (o *owner) ReleaseTensor() {
	if !o.copied {
		exports.done(o.src)
	}
}

// exports counts the outstanding exports of each GoMLX tensor whose
// memory is shared, and finalizes the tensors whose finalization waits
// for them.
var exports = registry{m: map[*tensors.Tensor]*entry{}}

type registry struct {
	mu sync.Mutex
	m  map[*tensors.Tensor]*entry
}

type entry struct {
	n        int
	finalize bool
}

// add counts one more export of t, unless t is finalized or its
// finalization is waiting. It looks at t under r.mu, which FinalizeAll
// and done also hold while they finalize t, so a tensor found valid here
// stays valid until its exports are done.
func (r *registry) add(t *tensors.Tensor) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[t]
	if e != nil && e.finalize {
		return &dlpack.FieldError{Field: "tensor", Value: "finalizing", Err: ErrTensor,
			Why: "FinalizeAll is waiting for the tensor's exports to end"}
	}
	if !t.Ok() {
		return &dlpack.FieldError{Field: "tensor", Value: "finalized", Err: ErrTensor,
			Why: "the GoMLX tensor was finalized; its memory may be reused"}
	}
	if e == nil {
		e = new(entry)
		r.m[t] = e
	}
	e.n++
	return nil
}

// usable reports whether t is valid and not waiting for FinalizeAll.
func (r *registry) usable(t *tensors.Tensor) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[t]
	return t.Ok() && (e == nil || !e.finalize)
}

func (r *registry) done(t *tensors.Tensor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[t]
	if e == nil {
		return
	}
	e.n--
	if e.n == 0 {
		delete(r.m, t)
		if e.finalize {
			_ = t.FinalizeAll()
		}
	}
}

// Exports returns the number of consumers that hold t's memory through
// tensors made by FromTensor (and any FromTensor or CopyFromTensor call
// reading t at that moment).
func Exports(t *tensors.Tensor) int {
	exports.mu.Lock()
	defer exports.mu.Unlock()
	if e := exports.m[t]; e != nil {
		return e.n
	}
	return 0
}

// FinalizeAll is t.FinalizeAll that waits for t's exports: with none
// outstanding it finalizes t now; otherwise t is finalized when the last
// consumer releases its tensor (its error is then dropped), and t must
// not be used meanwhile. This is how to free a tensor whose memory may
// still be read, without letting GoMLX reuse that memory under the
// consumer. A nil t is an error wrapping ErrTensor.
func FinalizeAll(t *tensors.Tensor) error {
	if t == nil {
		return &dlpack.FieldError{Field: "tensor", Value: "nil", Err: ErrTensor}
	}
	exports.mu.Lock()
	defer exports.mu.Unlock()
	if e := exports.m[t]; e != nil {
		e.finalize = true
		return nil
	}
	return t.FinalizeAll()
}
