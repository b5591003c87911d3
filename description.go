package dlpack

import (
	"fmt"
	"slices"
	"strconv"
)

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
