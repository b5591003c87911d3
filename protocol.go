package dlpack

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack/internal/nilcheck"
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

// Close calls m's deleter, if it has one, with m: what a holder of the
// tensor that does not hand it on does, such as the caller of Export
// whose C consumer refused it. Close at most once, and never after handing
// m to a consumer (which then owns it): the deleter frees the struct. For
// a tensor this package exported, a second call is refused and counted
// (Stats.BadReleases) as long as the struct was not reused by a later
// export. A nil m is a no-op. It returns nil (a deleter reports nothing);
// the error is there so that every owner closes the same way (io.Closer).
func (m *ManagedTensorVersioned) Close() error {
	if m != nil {
		callDeleter(m.Deleter, uintptr(unsafe.Pointer(m)))
	}
	return nil
}

// Close calls m's deleter, if it has one, with m: ManagedTensorVersioned's
// Close for the legacy struct, with the same rules.
func (m *ManagedTensor) Close() error {
	if m != nil {
		callDeleter(m.Deleter, uintptr(unsafe.Pointer(m)))
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

// CheckedDescription is a Description validated once by CheckDescription,
// for a Source to hand out through Description.Checked. It is immutable:
// it holds its own copies of the shape and strides, and the memory it
// describes must stay valid (kept by the Source's Owner) while it is used.
type CheckedDescription struct {
	d Description // Owner and Checked nil
	c checked
}

// CheckDescription validates d as Produce and From would (the errors name
// "description.<field>") and returns it checked, without d.Owner, which
// each use of it supplies. d.Checked is not allowed.
func CheckDescription(d *Description) (*CheckedDescription, error) {
	if d.Checked != nil {
		return nil, fieldErr(ErrRequest, "description.checked", "set", "a checked description cannot be checked again")
	}
	cd := &CheckedDescription{d: *d}
	cd.d.Owner, cd.d.Pinned = nil, false
	cd.d.Shape, cd.d.Strides = slices.Clone(d.Shape), slices.Clone(d.Strides)
	if err := checkDescription(&cd.c, &cd.d, make([]int64, 2*min(len(d.Shape), MaxNDim+1))); err != nil {
		return nil, err
	}
	return cd, nil
}

// checkedOf returns the description to use and its checks: d itself,
// checked now into c (with dims as storage), or d.Checked's.
func checkedOf(d *Description, c *checked, dims []int64) (*Description, *checked, error) {
	if cd := d.Checked; cd != nil {
		return &cd.d, &cd.c, nil
	}
	return d, c, checkDescription(c, d, dims)
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

// checkDescription validates d and fills c as an import would: the same
// checks, with errors naming "description.<field>". dims is storage for
// the shape and strides.
func checkDescription(c *checked, d *Description, dims []int64) error {
	dev := d.Device
	if dev == (Device{}) {
		dev = CPUDevice
	}
	// Field by field: c lives in the heap, and a whole-struct store of a
	// type with pointers costs a typed copy.
	c.dtype, c.device = d.DType, dev
	if err := d.DType.Validate(); err != nil {
		c.ndim, c.shape, c.strides, c.extent = 0, nil, nil, extent{}
		return prefixed(err, "description.")
	}
	if dev.Type != CPU || dev.ID != 0 {
		if err := dev.Validate(); err != nil {
			c.ndim, c.shape, c.strides, c.extent = 0, nil, nil, extent{}
			return prefixed(err, "description.")
		}
	}
	base := uintptr(d.Data)
	if d.Data == nil {
		base = d.Addr
	}
	err := c.checkGeometry(base, d.Data == nil && dev.Type == CPU, d.Size, d.ByteOffset, d.Shape, d.Strides, d.ReadOnly, dims)
	if d.Copied {
		c.flags |= FlagIsCopied
	}
	return err
}

// checkGeometry is the part of checkDescription that every description
// needs, c.dtype and c.device already set and valid: the shape and
// strides, and that every element lies inside the size bytes from base.
// cpuAddr says that CPU memory came as an address, not as Data (refused
// unless the tensor is empty). Array's path to From calls it directly,
// its type settling the rest.
func (c *checked) checkGeometry(base uintptr, cpuAddr bool, size uintptr, byteOffset uint64, shape, strides []int64, readOnly bool, dims []int64) error {
	var flags Flags
	if readOnly {
		flags = FlagReadOnly
	}
	c.flags, c.version, c.legacy = flags, CurrentVersion, false
	c.rawData, c.offset, c.data, c.writable = 0, 0, 0, !readOnly
	c.ndim, c.extent = 0, extent{}
	n := len(shape)
	if n > MaxNDim {
		c.shape, c.strides = nil, nil
		return fieldErr(ErrNDim, "description.shape", n, "ndim must be 0.."+strconv.Itoa(MaxNDim))
	}
	if cap(dims) < 2*n {
		dims = make([]int64, 2*n)
	}
	c.shape, c.strides = dims[:n:n], dims[n:2*n:2*n]
	if strides != nil && len(strides) != n {
		return fieldErr(ErrStrides, "description.strides", clone(strides), "want "+strconv.Itoa(n)+" strides for the shape")
	}
	var err error
	if c.extent, err = checkDims(shape, strides, c.shape, c.strides, "description."); err != nil {
		return err
	}
	c.ndim = n
	if c.numel == 0 {
		c.rawData, c.data = base, base
		return nil
	}
	if base == 0 {
		return fieldErr(ErrNullData, "description.data", "nil", strconv.FormatInt(c.numel, 10)+" elements")
	}
	if cpuAddr {
		return fieldErr(ErrNullData, "description.data", "nil", "CPU memory is described by Data, not Addr")
	}
	var lo, hi int64
	ok := true
	if c.contiguous && !c.dtype.IsSubbyte() {
		hi, ok = mulCheck(c.numel, int64(c.dtype.ItemSize()))
	} else {
		lo, hi, ok = c.byteSpan(c.dtype, false)
	}
	if !ok || byteOffset > uint64(maxInt64) {
		return fieldErr(ErrOverflow, "description.strides", clone(c.strides), "byte extent overflows int64")
	}
	first := int64(byteOffset)
	if lo+first < 0 || uint64(hi+first) > uint64(size) {
		return fieldErr(ErrShape, "description.shape", clone(c.shape),
			"with strides "+formatInts(c.strides)+" and byte offset "+strconv.FormatUint(byteOffset, 10)+
				" the tensor reaches bytes "+strconv.FormatInt(lo+first, 10)+".."+strconv.FormatInt(hi+first, 10)+
				" of "+strconv.FormatUint(uint64(size), 10))
	}
	c.rawData, c.data = base, base+uintptr(first)
	return nil
}

const maxInt64 = 1<<63 - 1

// compactGeometry is checkGeometry for the commonest description, filling
// c the same way: CPU memory at base, NULL strides, a shape that
// compactDims takes, and elems elements from byteOffset on. It writes each
// field once; for anything else (an error included) it reports false and
// the caller takes checkGeometry.
func (c *checked) compactGeometry(base uintptr, elems int64, byteOffset uintptr, shape []int64, readOnly bool, dims []int64) bool {
	n := len(shape)
	if 2*n > len(dims) {
		return false
	}
	e, ok := compactDims(shape, dims[:n:n], dims[n:2*n:2*n])
	if !ok || e.numel > elems {
		return false
	}
	var flags Flags
	if readOnly {
		flags = FlagReadOnly
	}
	c.flags, c.version, c.legacy, c.offset, c.writable = flags, CurrentVersion, false, 0, !readOnly
	c.ndim, c.extent = n, e
	c.shape, c.strides = dims[:n:n], dims[n:2*n:2*n]
	c.rawData, c.data = base, base
	if e.numel > 0 {
		c.data = base + byteOffset
	}
	return true
}

// hostReadable reports whether the CPU can read (and so copy) a described
// tensor: its memory is given as Data, or it is an empty CPU tensor.
func hostReadable(d *Description, c *checked) bool {
	return d.Data != nil || (c.numel == 0 && c.device.Type == CPU)
}

// negotiate decides, for a checked description and a request, whether the
// consumer gets the memory itself or a copy, and checks the rest of the
// request. hostData says whether the CPU can read the memory.
func negotiate(c *checked, req *Request, hostData bool) (copyData bool, err error) {
	if req.Device != (Device{}) && req.Device != c.device {
		return false, fieldErr(ErrDevice, "request.device", req.Device, "the tensor is on "+c.device.String()+"; this package does not move data between devices")
	}
	if req.HasStream && c.device.Type == CPU && req.Stream != -1 {
		return false, fieldErr(ErrRequest, "request.stream", req.Stream, "CPU tensors take no stream")
	}
	if req.Copy > CopyAlways || req.Copy < CopyIfNeeded {
		return false, fieldErr(ErrRequest, "request.copy", req.Copy, "unknown copy mode")
	}
	readOnly := !c.writable
	copyData = req.Copy == CopyAlways || (readOnly && (req.IsLegacy() || req.Writable))
	if !copyData {
		return false, nil
	}
	if req.Copy == CopyNever {
		if req.IsLegacy() {
			return false, fieldErr(ErrReadOnly, "request.max_version", req.MaxVersion,
				"read-only data needs a versioned tensor (legacy ones cannot carry the flag) or a copy, and the request forbids copies")
		}
		return false, fieldErr(ErrReadOnly, "request.copy", req.Copy, "the consumer will write read-only data, and the request forbids copies")
	}
	if !hostData {
		return false, fieldErr(ErrDevice, "request.copy", req.Copy, "this package copies only memory the CPU can read; the tensor is on "+c.device.String())
	}
	if c.dtype.IsSubbyte() {
		return false, fieldErr(ErrDataType, "request.copy", req.Copy, "copies of sub-byte types ("+c.dtype.String()+") are not supported")
	}
	return true, nil
}

// Alignment returns the byte alignment a consumer may assume for the first
// element of a tensor of type d (and so, elements being whole multiples of
// it apart, for every element): the size of one scalar (one lane; half a
// complex number, as C's _Alignof(double _Complex) is _Alignof(double)),
// reduced to the largest power of two that divides it, and capped at 8,
// the largest alignment of any C or Go scalar type DLPack carries. Sub-byte
// types need 1.
func (d DataType) Alignment() int {
	bits := int(d.Bits)
	if d.Code == CodeComplex {
		bits /= 2
	}
	if bits%8 != 0 || bits == 0 {
		return 1
	}
	s := bits / 8
	return min(s&-s, 8)
}

// realign decides, for a checked description that negotiate lets share,
// what to do when its first element is misaligned for its type (a file
// whose header leaves the data at an odd offset, a foreign producer's
// pointer): a consumer would read it through a misaligned C pointer. It is
// copied (aligned, FlagIsCopied on versioned tensors) when the request
// allows a copy and the CPU can read it, and refused with ErrAlignment
// otherwise.
func realign(c *checked, req *Request, hostData bool) (copyData bool, err error) {
	a := uintptr(c.dtype.Alignment())
	if c.numel == 0 || c.data%a == 0 {
		return false, nil
	}
	why := fmt.Sprintf("address %#x is %d bytes past a multiple of %d, the alignment of %v", c.data, c.data%a, a, c.dtype)
	switch {
	case req.Copy == CopyNever:
		return false, fieldErr(ErrAlignment, "description.data", fmt.Sprintf("%#x", c.data), why+", and the request forbids copies")
	case !hostData:
		return false, fieldErr(ErrAlignment, "description.data", fmt.Sprintf("%#x", c.data), why+", and this package copies only memory the CPU can read; the tensor is on "+c.device.String())
	}
	return true, nil
}

// produceState is Produce's scratch: the Description handed to the Source
// (a pointer passed to an interface method escapes) and the checked copy,
// pooled so that an export allocates nothing.
type produceState struct {
	d    Description
	c    checked
	dims [2 * keptNDim]int64
}

var producePool = sync.Pool{New: func() any { return new(produceState) }}

// Produce is the whole producer side of the protocol for a Source. It
// validates the description, negotiates the request (versioned or legacy
// by MaxVersion; read-only data copied for legacy and writing consumers
// unless CopyNever; CopyAlways copies; the device must match; CPU tensors
// take no stream), and hands out either the memory itself, with d.Owner
// kept until the consumer's deleter runs, or a compact copy in 256-byte
// aligned C memory that owes nothing to the source. Memory whose first
// element is misaligned for its type (DataType.Alignment) is never handed
// out: it is copied (FlagIsCopied) unless the request forbids copies or the
// CPU cannot read it, and then refused with ErrAlignment.
//
// Offsets are folded into the data pointer (byte_offset is 0, as consumers
// that ignore byte_offset expect), strides are always sent, and Go memory
// is pinned until the deleter. On error nothing is outstanding and the
// owner has been released. A nil s, or a nil pointer (a typed nil such as
// a nil *Array), is refused with an error wrapping ErrNilPointer.
func Produce(s Source, req Request) (Managed, error) {
	if nilcheck.IsNil(s) {
		return Managed{}, nilProducer(s)
	}
	if !cgoEnabled {
		return Managed{}, ErrCgoRequired
	}
	ps := producePool.Get().(*produceState)
	err := s.DescribeTensor(&ps.d)
	var m Managed
	if err == nil {
		m, err = produceDescribed(ps, req, s)
	}
	ps.d = Description{}
	ps.c.shape, ps.c.strides = nil, nil
	producePool.Put(ps)
	return m, err
}

// produceDescribed exports the description in ps, which the caller got
// from s; it owns one reference to ps.d.Owner.
func produceDescribed(ps *produceState, req Request, s Source) (Managed, error) {
	owner, pinned := ps.d.Owner, ps.d.Pinned
	d, c, err := checkedOf(&ps.d, &ps.c, ps.dims[:])
	var copyData bool
	if err == nil {
		copyData, err = negotiate(c, &req, hostReadable(d, c))
	}
	if err == nil && !copyData {
		copyData, err = realign(c, &req, hostReadable(d, c))
	}
	if err == nil && req.HasStream && c.device.Type != CPU && !copyData {
		if ss, ok := s.(StreamSyncer); ok {
			err = ss.SyncStream(c.device, req.Stream)
		}
	}
	if err != nil {
		releaseOwner(owner)
		return Managed{}, err
	}
	legacy := req.IsLegacy()
	if copyData {
		var src unsafe.Pointer
		if c.numel > 0 {
			src = unsafe.Add(d.Data, d.ByteOffset)
		}
		p, err := exportCopy(c, src, legacy)
		releaseOwner(owner)
		return managedOf(p, legacy), err
	}
	var base unsafe.Pointer
	if c.numel > 0 {
		base = d.Data
	}
	p, err := exportShared(c, base, d.Size, owner, pinned, legacy)
	if err != nil {
		releaseOwner(owner)
	}
	return managedOf(p, legacy), err
}

func managedOf(p unsafe.Pointer, legacy bool) Managed {
	switch {
	case p == nil:
		return Managed{}
	case legacy:
		return Managed{Legacy: (*ManagedTensor)(p)}
	}
	return Managed{Versioned: (*ManagedTensorVersioned)(p)}
}

// exportShared lends described memory to a consumer through an export
// record: Go memory at base is pinned (unless the Source keeps it pinned:
// pinned), owner is kept and released by the deleter. c is the checked
// description.
func exportShared(c *checked, base unsafe.Pointer, size uintptr, owner any, pinned, legacy bool) (unsafe.Pointer, error) {
	nd := c.ndim
	rec, block, oneOff := recordAndBlock(legacy, nd)
	if block == nil {
		return nil, ErrNoMemory
	}
	dims := blockDims(block, legacy, nd)
	copy(dims[:nd], c.shape)
	copy(dims[nd:], c.strides)
	if oneOff {
		oneOffExports.Add(1)
	}
	data := c.data
	if c.numel == 0 {
		data = emptyData
	} else if base != nil {
		if !pinned {
			rec.pinner.Pin(base) // the release unpins it (a no-op when pinned is set)
		}
		rec.base, rec.size = base, size
	}
	rec.owner = owner
	deleter := deleterGoVersioned
	if legacy {
		deleter = deleterGoLegacy
	}
	p := plan{extent: c.extent, ndim: nd, flags: c.flags & (FlagReadOnly | FlagIsCopied)}
	m := writeBlock(block, legacy, prefix{handle: uint64(rec.handle), gen: rec.gen.Load(), magic: magicGo}, rec.handle, deleter, data, c.dtype, c.device, &p)
	goExports.add(rec, 1)
	return m, nil
}

// exportCopy copies the elements of a checked CPU tensor whose first
// element is at src into a new compact row-major buffer and exports it
// with a pure-C deleter; versioned copies carry FlagIsCopied, and
// FlagReadOnly is dropped (the copy is the consumer's alone).
func exportCopy(c *checked, src unsafe.Pointer, legacy bool) (unsafe.Pointer, error) {
	item := int64(c.dtype.ItemSize())
	nbytes, ok := mulCheck(c.numel, item)
	if !ok || uint64(nbytes) > uint64(^uintptr(0)>>1)-2*bufferAlign {
		return nil, fieldErr(ErrOverflow, "shape", clone(c.shape), "copy size overflows")
	}
	nd := c.ndim
	block := newBlock(legacy, nd)
	if block == nil {
		return nil, ErrNoMemory
	}
	ctl := cBufferAlloc(uint64(nbytes))
	if ctl == nil {
		cFree(block)
		return nil, fieldErr(ErrNoMemory, "shape", clone(c.shape), strconv.FormatInt(nbytes, 10)+" bytes")
	}
	dst := unsafe.Add(ctl, bufferDataOffset)
	if c.numel > 0 {
		copyStrided(dst, src, c.shape, c.strides, item)
	}
	dims := blockDims(block, legacy, nd)
	e, _ := checkDims(c.shape, nil, dims[:nd:nd], dims[nd:2*nd:2*nd], "")
	p := plan{extent: e, ndim: nd}
	if !legacy {
		p.flags = FlagIsCopied
	}
	deleter := deleterBufferVersioned
	if legacy {
		deleter = deleterBufferLegacy
	}
	m := writeBlock(block, legacy, prefix{handle: uint64(uintptr(ctl)), magic: magicBuffer}, uintptr(ctl), deleter, uintptr(dst), c.dtype, CPUDevice, &p)
	atomic.AddInt64(bufferExports, 1)
	return m, nil
}

// copyStrided copies the elements (item bytes each) of a strided tensor
// whose first element is at src to dst in row-major order.
func copyStrided(dst, src unsafe.Pointer, shape, strides []int64, item int64) {
	if len(shape) == 0 {
		copy(unsafe.Slice((*byte)(dst), item), unsafe.Slice((*byte)(src), item))
		return
	}
	if isRowMajor(shape, strides, numelOf(shape)) {
		n := numelOf(shape) * item
		copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
		return
	}
	var walk func(dim int, s unsafe.Pointer)
	off := int64(0)
	walk = func(dim int, s unsafe.Pointer) {
		st := strides[dim] * item
		if dim == len(shape)-1 {
			for i := int64(0); i < shape[dim]; i++ {
				copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), item), unsafe.Slice((*byte)(unsafe.Add(s, i*st)), item))
				off += item
			}
			return
		}
		for i := int64(0); i < shape[dim]; i++ {
			walk(dim+1, unsafe.Add(s, i*st))
		}
	}
	walk(0, src)
}

func numelOf(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// ---- The consumer entry ----------------------------------------------------

// From takes any Producer's tensor as a Foreign, sending the zero Request
// (RequireWritable among opts makes it a writing request).
//
// A Source (Array, Buffer, Foreign, the bridges' types) is taken Go to Go:
// no C block, no pinning, no handle and no call into C; its Owner is kept
// by the Foreign and released at Close. Other producers are asked through
// DLPack and their tensor imported as Import does. The options apply as
// for Import. On error nothing is held: a tensor that a producer's DLPack
// returned together with an error (which breaks the Producer contract) is
// released. A nil p, or a nil pointer (a typed nil such as a nil *Array),
// is refused with an error wrapping ErrNilPointer.
func From(p Producer, opts ...ImportOption) (Foreign, error) {
	req := Request{MaxVersion: CurrentVersion}
	if len(opts) > 0 && hasOption(opts, importWritable) {
		req.Writable = true
	}
	return fromAny(p, &req, opts)
}

// FromRequest is From with the request stated: a copy forced or forbidden,
// a stream, a legacy tensor.
func FromRequest(p Producer, req Request, opts ...ImportOption) (Foreign, error) {
	return fromAny(p, &req, opts)
}

func fromAny(p Producer, req *Request, opts []ImportOption) (Foreign, error) {
	if a, ok := p.(goArray); ok {
		return fromArray(a, req, opts) // a nil *Array is refused there
	}
	if nilcheck.IsNil(p) {
		return Foreign{}, nilProducer(p)
	}
	if src, ok := p.(Source); ok {
		return fromSource(src, req, opts)
	}
	return fromProducer(p, req, opts)
}

// nilProducer is the error for a nil producer or source: nil, or a nil
// pointer, whose methods would panic on it.
func nilProducer(p any) error {
	v := "nil"
	if p != nil {
		v = fmt.Sprintf("(%T)(nil)", p)
	}
	return fieldErr(ErrNilPointer, "producer", v, "")
}

// fromProducer asks a Producer that is not a Source for its tensor and
// imports it.
func fromProducer(p Producer, req *Request, opts []ImportOption) (Foreign, error) {
	m, err := p.DLPack(*req)
	if err != nil {
		// A producer returns no tensor with an error; one that did broke
		// the contract, and the tensor is ours to release.
		m.Close()
		return Foreign{}, err
	}
	if m.Pointer() == nil {
		return Foreign{}, fieldErr(ErrNilPointer, "managed tensor", "NULL", "the producer returned no tensor and no error")
	}
	return m.Import(opts...)
}

// nativeOwner stands in for the owner of Go-to-Go imports whose source
// needs no release: Close then goes the owned way, with no safety net to
// stop.
var nativeOwner = new(owner)

// fromSource is the Go-to-Go path of From.
func fromSource(src Source, req *Request, opts []ImportOption) (Foreign, error) {
	s := takeState()
	d := &s.desc
	if err := src.DescribeTensor(d); err != nil {
		*d = Description{}
		s.recycle()
		return Foreign{}, err
	}
	o := d.Owner
	var err error
	if cd := d.Checked; cd != nil {
		s.useChecked(cd)
		d = &cd.d
	} else {
		err = checkDescription(&s.c, d, s.dims[:])
	}
	var copyData bool
	if err == nil {
		copyData, err = negotiate(&s.c, req, hostReadable(d, &s.c))
	}
	if err == nil && !copyData {
		s.deleter, s.self = 0, 0
		err = s.settle(nil, false, opts)
	}
	if err != nil || copyData {
		data, byteOff := d.Data, d.ByteOffset
		s.desc = Description{}
		c := s.c
		s.recycle()
		if err != nil {
			releaseOwner(o)
			return Foreign{}, err
		}
		// A copy: made by the C path, then imported like any tensor.
		if !cgoEnabled {
			releaseOwner(o)
			return Foreign{}, ErrCgoRequired
		}
		var first unsafe.Pointer
		if c.numel > 0 {
			first = unsafe.Add(data, byteOff)
		}
		p, err := exportCopy(&c, first, req.IsLegacy())
		releaseOwner(o)
		if err != nil {
			return Foreign{}, err
		}
		return managedOf(p, req.IsLegacy()).Import(opts...)
	}
	if s.c.numel > 0 && d.Data != nil {
		s.goBase, s.goOff = unsafe.Add(d.Data, d.ByteOffset), 0
	}
	s.desc = Description{}
	s.native, s.owned, s.owner = true, true, o
	s.holds.Store(1)
	gen := s.gen()
	own := nativeOwner
	if _, ok := o.(Releaser); ok {
		s.releases = true
		own = new(owner)
		s.cleanup = runtime.AddCleanup(own, releaseLeaked, leakArg{s, gen})
	}
	return Foreign{s: s, own: own, gen: gen}, nil
}

// useChecked fills the state's checks from a checked description, with
// the shape and strides in the state's own storage.
func (s *foreignState) useChecked(cd *CheckedDescription) {
	s.c = cd.c
	if n := cd.c.ndim; 2*n <= len(s.dims) {
		copy(s.dims[:n], cd.c.shape)
		copy(s.dims[n:2*n], cd.c.strides)
		s.c.shape, s.c.strides = s.dims[:n:n], s.dims[n:2*n:2*n]
	}
}

// goArray is implemented by *Array[T]: From takes an Array into the
// import's state directly, with the checks a Description gets but without
// building one, and without the checks its type settles (a valid element
// type, CPU memory, an owner with nothing to release).
type goArray interface {
	Source
	// describeInto fills c with the checked tensor and returns the
	// address of Data, as DescribeTensor and checkDescription would.
	describeInto(c *checked, dims []int64) (unsafe.Pointer, error)
}

// fromArray is From's path for an Array: fromSource without the
// Description.
func fromArray(a goArray, req *Request, opts []ImportOption) (Foreign, error) {
	s := takeState()
	data, err := a.describeInto(&s.c, s.dims[:])
	var copyData bool
	if err == nil {
		copyData, err = negotiate(&s.c, req, true) // an accepted Array is in Go memory, or empty
	}
	if err == nil && !copyData {
		s.deleter, s.self = 0, 0
		if len(opts) == 0 {
			s.hostOK = true // what settle decides for Go memory without options
		} else {
			err = s.settle(nil, false, opts)
		}
	}
	if err != nil || copyData {
		s.recycle()
		if err != nil {
			return Foreign{}, err
		}
		return fromSource(a, req, opts) // a copy: the general path
	}
	if s.c.numel > 0 {
		s.goBase, s.goOff = unsafe.Add(data, s.c.data-s.c.rawData), 0
	}
	s.native, s.owned, s.owner = true, true, a
	s.holds.Store(1)
	return Foreign{s: s, own: nativeOwner, gen: s.gen()}, nil
}

// ---- Array: a Go slice with a shape ---------------------------------------

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

// ---- Buffer and Foreign as Sources ----------------------------------------

// bufferRef is one reference to a Buffer's memory, held by a described
// export and dropped by its release. It is pointer-shaped, so storing it
// in Description.Owner allocates nothing.
type bufferRef struct{ ctl unsafe.Pointer }

func (r bufferRef) ReleaseTensor() {
	if atomic.AddInt64(&(*bufctl)(r.ctl).refs, -1) == 0 {
		cFree(r.ctl)
	}
}

// DescribeTensor implements Source: the buffer's memory, compact, with a
// reference that keeps it alive after Close until the last consumer.
func (b *Buffer[T]) DescribeTensor(d *Description) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.ctl == nil {
		return ErrClosed
	}
	atomic.AddInt64(&(*bufctl)(b.ctl).refs, 1)
	var z T
	d.Data = unsafe.Add(b.ctl, bufferDataOffset)
	d.Size = uintptr(len(b.data)) * unsafe.Sizeof(z)
	d.DType = DataTypeOf[T]()
	d.Shape = b.shape
	d.Owner = bufferRef{ctl: b.ctl}
	return nil
}

// DLPackDevice implements Producer: the CPU.
func (b *Buffer[T]) DLPackDevice() Device { return CPUDevice }

// DLPack implements Producer. A request the buffer can share as it is
// (no copy asked for, the CPU, no stream) gets the buffer's own export,
// whose deleter is pure C; every other request goes through Produce.
func (b *Buffer[T]) DLPack(req Request) (Managed, error) {
	shareAsIs := (req.Copy == CopyIfNeeded || req.Copy == CopyNever) &&
		(req.Device == Device{} || req.Device == CPUDevice) &&
		(!req.HasStream || req.Stream == -1)
	if !shareAsIs {
		return Produce(b, req)
	}
	p, err := b.export(nil, nil, req.IsLegacy())
	return managedOf(p, req.IsLegacy()), err
}

// DescribeTensor implements Source, which makes a Foreign re-exportable:
// an imported tensor handed on to other consumers (C, Python, Rust, Go)
// without a copy. The Foreign and each consumer hold the tensor; the
// original producer's deleter runs exactly once, after Close and the last
// consumer's release, in whatever order they come. Only owned imports
// (Import, From) can be handed on: a borrowed one (Borrow, BorrowBatch)
// ends with its scope, and is refused with ErrBorrowed.
func (f Foreign) DescribeTensor(d *Description) error {
	s := f.live()
	if s == nil {
		return ErrClosed
	}
	if !s.owned {
		return fieldErr(ErrBorrowed, "Foreign", "borrowed", "a scoped import ends with its scope; use Import to hand a tensor on")
	}
	if !s.hold(f.gen) {
		return ErrClosed
	}
	c := &s.c
	d.DType, d.Device, d.Shape, d.Strides = c.dtype, c.device, c.shape, c.strides
	d.ReadOnly = !c.writable
	d.Owner = s
	if c.numel == 0 {
		return nil
	}
	lo, hi, _ := c.byteSpan(c.dtype, c.flags&FlagSubbyteTypePadded != 0)
	d.Size, d.ByteOffset = uintptr(hi-lo), uint64(-lo)
	switch {
	case s.goBase != nil:
		d.Data = unsafe.Add(s.goBase, int(s.goOff)+int(lo))
	case c.device.Type == CPU || s.hostOK:
		d.Data = unsafe.Add(*(*unsafe.Pointer)(unsafe.Pointer(&c.data)), lo)
	default:
		d.Addr = c.data + uintptr(lo)
	}
	return nil
}

// DLPackDevice implements Producer: the tensor's device.
func (f Foreign) DLPackDevice() Device { return f.Device() }

// DLPack implements Producer through Produce: the tensor handed on.
func (f Foreign) DLPack(req Request) (Managed, error) { return Produce(f, req) }

// ReleaseTensor drops a consumer's hold on an imported tensor (see
// Foreign.DescribeTensor).
func (s *foreignState) ReleaseTensor() { s.drop() }

// hold adds a consumer's hold to an owned import while its handle of
// generation gen is open.
func (s *foreignState) hold(gen uint32) bool {
	// Never from zero: a state with no holds is released or pooled, and
	// a stale handle racing with the last release must not revive it.
	for {
		h := s.holds.Load()
		if h <= 0 {
			return false
		}
		if s.holds.CompareAndSwap(h, h+1) {
			break
		}
	}
	if s.st.Load() != uint64(gen)<<2|stOpen {
		s.drop()
		return false
	}
	return true
}

// drop removes one hold (the Go handle's, at Close, or a consumer's); the
// last one releases the tensor and recycles the state.
func (s *foreignState) drop() {
	if s.holds.Add(-1) == 0 {
		s.releaseClaimed()
		s.recycle()
	}
}
