package dlpack

import (
	"strconv"
	"unsafe"
)

// ---- The producer protocol -------------------------------------------------
//
// Every ecosystem that speaks DLPack has one producer protocol: Python's
// __dlpack__ + __dlpack_device__, Rust dlpark's traits. This is Go's:
//
//   - A Producer answers a Request (the arguments of __dlpack__) with a
//     Managed tensor, versioned or legacy as negotiated.
//   - A Source only describes its memory (a Description); Produce gives it
//     the whole producer side, and From takes it Go to Go without C.
//   - From is the consumer entry: any Producer becomes a Foreign.
//
// Array (a Go slice with a shape), Buffer and Foreign are Sources and
// Producers; the bridges (dlgonum, images, files, Arrow, ...) add theirs.

// CopyMode is a consumer's copy request: Python's copy=None, False, True.
type CopyMode int8

const (
	// CopyIfNeeded shares the memory when the request allows it and copies
	// otherwise (read-only data for a legacy or writing consumer).
	CopyIfNeeded CopyMode = iota
	// CopyNever never copies: what cannot be shared is an error.
	CopyNever
	// CopyAlways always copies; versioned copies carry FlagIsCopied.
	CopyAlways
)

// String returns "if-needed", "never" or "always".
func (m CopyMode) String() string {
	switch m {
	case CopyIfNeeded:
		return "if-needed"
	case CopyNever:
		return "never"
	case CopyAlways:
		return "always"
	}
	return "copy(" + strconv.Itoa(int(m)) + ")"
}

// Request is what a consumer asks of a Producer: the Go form of the
// arguments of Python's __dlpack__(stream, max_version, dl_device, copy),
// plus whether the consumer will write.
//
// The zero Request is the modern default: a DLManagedTensorVersioned of
// this package's version, shared when possible and copied when needed, on
// the producer's device. A legacy DLManagedTensor (what Python's
// max_version=None asks for) is asked for explicitly, with Legacy.
type Request struct {
	// MaxVersion is the highest DLPack version the consumer reads: the zero
	// Version (not stated) or 1.x and later get a DLManagedTensorVersioned
	// of this package's version; a stated version below 1 (0.8, say) gets
	// a legacy DLManagedTensor, as Legacy does.
	MaxVersion Version
	// Legacy asks for a legacy (pre-1.0) DLManagedTensor, which carries no
	// flags: read-only data then goes as a copy (see Copy).
	Legacy bool
	// Copy says whether the producer may, must or must not copy.
	Copy CopyMode
	// Device is the device the consumer wants the data on; the zero Device
	// accepts the producer's own.
	Device Device
	// Stream is the consumer's stream (CUDA, ROCm), valid when HasStream.
	// CPU tensors take no stream (-1, "no synchronisation", is accepted).
	Stream    int64
	HasStream bool
	// Writable says the consumer will write the data: read-only data is
	// then copied, or refused under CopyNever.
	Writable bool
}

// IsLegacy reports whether the request asks for a legacy DLManagedTensor:
// Legacy is set, or MaxVersion is stated and below 1.0.
func (r Request) IsLegacy() bool {
	return r.Legacy || (r.MaxVersion != Version{} && r.MaxVersion.Major < 1)
}

// Managed is a managed tensor handed from a producer to a consumer: exactly
// one of its fields is set, as negotiated by the Request. Whoever holds it
// owns it until it calls the deleter (Close) or hands it on (Import, a C
// consumer, a Python capsule).
type Managed struct {
	Versioned *ManagedTensorVersioned
	Legacy    *ManagedTensor
}

// Pointer returns the managed struct that is set, or nil.
func (m Managed) Pointer() unsafe.Pointer {
	if m.Versioned != nil {
		return unsafe.Pointer(m.Versioned)
	}
	return unsafe.Pointer(m.Legacy)
}

// IsLegacy reports whether m holds a legacy DLManagedTensor.
func (m Managed) IsLegacy() bool { return m.Versioned == nil && m.Legacy != nil }

// Import takes ownership of m: Import or ImportLegacy, as its kind says.
// On error m has been released.
func (m Managed) Import(opts ...ImportOption) (Foreign, error) {
	if m.IsLegacy() {
		return ImportLegacy(unsafe.Pointer(m.Legacy), opts...)
	}
	return Import(unsafe.Pointer(m.Versioned), opts...)
}

// Close calls the tensor's deleter (if any): for a holder that gives up
// a tensor it will not use or hand on. The zero Managed is a no-op. Close
// at most once, and never after handing m on: the deleter frees the
// struct. It returns nil (a deleter reports nothing); the error is there
// so that every owner of the library closes the same way (io.Closer).
func (m Managed) Close() error {
	switch {
	case m.Versioned != nil:
		return m.Versioned.Close()
	case m.Legacy != nil:
		return m.Legacy.Close()
	}
	return nil
}

// Producer is a Go value that holds a tensor and hands it out: the Go
// counterpart of Python's __dlpack__ and __dlpack_device__.
//
// DLPack answers a Request with a managed tensor, versioned or legacy as
// the request's MaxVersion says, FlagIsCopied set when it copied; or with
// an error that wraps a sentinel and names the part of the request it
// cannot honour ("request.copy", "request.max_version", "request.device",
// "request.stream"). Types that implement Source get a correct DLPack from
// Produce.
type Producer interface {
	DLPackDevice() Device
	DLPack(req Request) (Managed, error)
}

// Source is the trait-like path of the protocol: a type that can describe
// its memory gets the whole protocol (Produce for C, Python and Rust
// consumers, From for Go ones) without writing an exporter.
//
// DescribeTensor fills d; it must not keep d. When it returns nil, the
// consumer owns one reference to d.Owner: it keeps d.Owner reachable until
// the last user of the tensor is done, and then, if d.Owner implements
// Releaser, calls ReleaseTensor exactly once (also when the description is
// then refused), from any goroutine or C thread.
type Source interface {
	DescribeTensor(d *Description) error
}

// Releaser is implemented by a Description's Owner that must learn when
// the last consumer of a described tensor is done: to drop a reference
// count, unmap a file, release an Arrow array. ReleaseTensor must not
// panic; it may run on a thread Go did not create.
type Releaser interface {
	ReleaseTensor()
}

// StreamSyncer is implemented by Sources of device memory that can order
// their pending work before a consumer's stream (Python's
// __dlpack__(stream=...)). Produce calls it when a request names a stream
// for a non-CPU tensor; without it the stream is not synchronised.
type StreamSyncer interface {
	SyncStream(dev Device, stream int64) error
}

// Description is what a Source says about its memory, as plainly as
// image.RGBA says it: where, how big, which elements, who keeps it alive.
type Description struct {
	// Data is memory the CPU can read: Go memory (pinned while a C
	// consumer holds it) or memory outside the Go heap (C, a file
	// mapping). It is nil for device memory (see Addr); it may be nil for
	// an empty tensor.
	Data unsafe.Pointer
	// Addr is the address of device memory that Go never dereferences;
	// used only when Data is nil.
	Addr uintptr
	// Size is the number of bytes at Data (or Addr) that the tensor may
	// reach: every element lies inside [Data, Data+Size).
	Size uintptr
	// DType is the element type.
	DType DataType
	// Shape and Strides (in elements; nil means compact row-major) give
	// the elements, from ByteOffset bytes after Data: the first element
	// (index 0 in every dimension). Strides may be zero or negative.
	Shape      []int64
	Strides    []int64
	ByteOffset uint64
	// Device is where the memory is; the zero Device means CPUDevice.
	Device Device
	// ReadOnly makes every consumer's tensor read-only: FlagReadOnly on
	// versioned tensors, a copy for legacy ones (which cannot carry it).
	ReadOnly bool
	// Copied says the memory is a copy the Source made of its original
	// (a file's data that was misaligned for its type, say), which writes
	// do not reach: versioned tensors carry FlagIsCopied.
	Copied bool
	// Owner is kept reachable until the last consumer is done; if it
	// implements Releaser, ReleaseTensor is called then, exactly once.
	Owner any
	// Pinned says that the Source keeps Data pinned (runtime.Pinner) for
	// as long as the Owner is reachable, so that Produce need not pin it
	// for each consumer: a Source that lends the same Go memory again and
	// again pins it once. Memory outside the Go heap needs no pin.
	Pinned bool
	// Checked, when set, is a description that CheckDescription has
	// already validated, and stands for every field above but Owner and
	// Pinned (which are then ignored): a Source that hands out the same
	// memory again and again checks it once, not at every export.
	Checked *CheckedDescription
}

// DescribeSlice sets d.Data, d.Size and d.DType to describe the elements
// of xs (its length; the capacity beyond it is not the tensor's).
func DescribeSlice[T Element](d *Description, xs []T) {
	var z T
	d.Data = unsafe.Pointer(unsafe.SliceData(xs))
	d.Size = uintptr(len(xs)) * unsafe.Sizeof(z)
	d.DType = DataTypeOf[T]()
}

// releaseOwner calls o's ReleaseTensor if it has one. A panic in it is
// swallowed: it may be running under a C deleter, where a panic would kill
// the process.
func releaseOwner(o any) {
	r, ok := o.(Releaser)
	if !ok {
		return
	}
	defer func() { _ = recover() }()
	r.ReleaseTensor()
}
