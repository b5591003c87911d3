package dlpack

import (
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

// MaxNDim is the largest ndim this package accepts (NumPy's limit).
const MaxNDim = 64

// layout is the checked geometry of a tensor. shape and strides have ndim
// entries each (strides filled in for compact tensors sent without them).
type layout struct {
	ndim    int
	shape   []int64
	strides []int64
	extent
}

// extent is the pointer-free part of a layout: what checkDims computes.
type extent struct {
	numel      int64
	contiguous bool
	// Element offsets, relative to the first element, of the lowest and
	// highest element (0 and 0 when numel is 0).
	minOff, maxOff int64
}

// mulCheck returns a*b and whether it fits in an int64. Dimensions and
// strides are almost always below 2^31 in magnitude, where the product
// cannot overflow; only larger operands take the 128-bit path.
func mulCheck(a, b int64) (int64, bool) {
	if uint64(a)+1<<31 < 1<<32 && uint64(b)+1<<31 < 1<<32 {
		return a * b, true
	}
	return mulCheckWide(a, b)
}

func mulCheckWide(a, b int64) (int64, bool) {
	ua, ub := uint64(a), uint64(b)
	if a < 0 {
		ua = -ua // |MinInt64| = 1<<63 as a uint64
	}
	if b < 0 {
		ub = -ub
	}
	hi, lo := bits.Mul64(ua, ub)
	if (a < 0) != (b < 0) {
		if hi != 0 || lo > 1<<63 {
			return 0, false
		}
		return int64(-lo), true
	}
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

func addCheck(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// checkDims validates shape and strides (strides may be nil: compact
// row-major), writes their copies to outShape and outStrides (len(shape)
// entries each; the strides filled in when nil) and computes the extent.
// The prefix names the fields in errors ("dl_tensor." or ""). It returns
// only pointer-free results, so that callers filling a heap object (an
// import's state) pay no write barriers for it.
func checkDims(shape, strides, outShape, outStrides []int64, prefix string) (extent, error) {
	n := len(shape)
	outShape, outStrides = outShape[:n], outStrides[:n]
	if strides == nil {
		if e, ok := compactDims(shape, outShape, outStrides); ok {
			return e, nil
		}
	}
	e := extent{numel: 1}
	for i, d := range shape {
		if d < 0 {
			return extent{}, fieldErr(ErrShape, prefix+"shape["+strconv.Itoa(i)+"]", d, "negative dimension")
		}
		outShape[i] = d
		var ok bool
		if e.numel, ok = mulCheck(e.numel, d); !ok {
			return extent{}, fieldErr(ErrOverflow, prefix+"shape", clone(shape), "element count overflows int64")
		}
	}
	if strides == nil {
		acc := int64(1)
		for i := n - 1; i >= 0; i-- {
			outStrides[i] = acc
			var ok bool
			if acc, ok = mulCheck(acc, max(outShape[i], 1)); !ok {
				return extent{}, fieldErr(ErrOverflow, prefix+"shape", clone(shape), "row-major strides overflow int64")
			}
		}
	} else {
		copy(outStrides, strides[:n])
	}
	// Compact row-major (the common case, and always when strides were
	// NULL): the extent is [0, numel-1], nothing left to check.
	if e.numel == 0 || strides == nil || isRowMajor(outShape, outStrides, e.numel) {
		e.contiguous = true
		e.maxOff = max(e.numel-1, 0)
		return e, nil
	}
	// Extent: the offsets of the lowest and highest element. Dimensions of
	// size 1 contribute nothing whatever their stride.
	for i := 0; i < n; i++ {
		if outShape[i] == 1 {
			continue
		}
		span, ok := mulCheck(outStrides[i], outShape[i]-1)
		if ok {
			if span >= 0 {
				e.maxOff, ok = addCheck(e.maxOff, span)
			} else {
				e.minOff, ok = addCheck(e.minOff, span)
			}
		}
		if !ok {
			return extent{}, fieldErr(ErrOverflow, prefix+"strides["+strconv.Itoa(i)+"]", outStrides[i], "extent overflows int64")
		}
	}
	if _, ok := addCheck(e.maxOff, -e.minOff); !ok {
		return extent{}, fieldErr(ErrOverflow, prefix+"strides", clone(outStrides), "extent overflows int64")
	}
	return e, nil
}

// compactDims is checkDims for NULL strides (compact row-major) when every
// dimension and every stride is in [0, 2^31), which is nearly every tensor:
// one pass, in which no product can overflow (each multiplies two numbers
// below 2^31). For anything else (a negative or huge dimension) it reports
// false, and the general path checks and names the error.
func compactDims(shape, outShape, outStrides []int64) (extent, bool) {
	acc, zero := int64(1), false
	for i := len(shape) - 1; i >= 0; i-- {
		d := shape[i]
		if uint64(d)|uint64(acc) >= 1<<31 {
			return extent{}, false
		}
		outShape[i], outStrides[i] = d, acc
		if d == 0 {
			zero = true // a stride steps over a dimension of 0 as over one of 1
		} else {
			acc *= d
		}
	}
	if zero {
		return extent{contiguous: true}, true
	}
	return extent{numel: acc, contiguous: true, maxOff: acc - 1}, true
}

// isRowMajor reports whether the layout is compact row-major (C order).
// Strides of size-1 dimensions are ignored; empty tensors are compact.
func isRowMajor(shape, strides []int64, numel int64) bool {
	if numel == 0 {
		return true
	}
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && strides[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// byteSpan returns the byte offsets, relative to the first element, of the
// lowest byte and one past the highest byte the tensor touches. padded is
// FlagSubbyteTypePadded. It reports false on overflow.
func (l *layout) byteSpan(dt DataType, padded bool) (lo, hi int64, ok bool) {
	if l.numel == 0 {
		return 0, 0, true
	}
	elemBits := int64(dt.Bits) * int64(dt.Lanes)
	if dt.IsSubbyte() && padded {
		elemBits = 8 * int64(dt.Lanes)
	}
	loBits, ok1 := mulCheck(l.minOff, elemBits)
	end, ok2 := addCheck(l.maxOff, 1)
	hiBits, ok3 := mulCheck(end, elemBits)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	lo = loBits >> 3 // floor, also for negative values
	hi = hiBits/8 + boolInt(hiBits%8 != 0)
	return lo, hi, true
}

// checked is a validated foreign tensor.
type checked struct {
	layout
	data     uintptr // address of the first element (data + byte_offset); 0 if data is NULL
	rawData  uintptr
	offset   uint64
	dtype    DataType
	device   Device
	flags    Flags
	version  Version
	legacy   bool
	writable bool
}

// checkTensor validates every field of a DLTensor read from foreign memory
// and fills c. version and flags come from the managed struct (legacy: 0.0
// and 0). dims is storage for the shape and strides copies.
func checkTensor(c *checked, t *Tensor, version Version, flags Flags, legacy bool, dims []int64) error {
	// Field by field rather than one composite literal: c lives in the
	// heap, and a whole-struct store of a type with pointers costs a
	// typed copy.
	c.dtype, c.device, c.flags, c.version, c.legacy = t.DType, t.Device, flags, version, legacy
	c.rawData, c.offset, c.data, c.writable = t.Data, t.ByteOffset, 0, false
	c.ndim, c.shape, c.strides, c.extent = 0, nil, nil, extent{}
	if t.NDim < 0 || t.NDim > MaxNDim {
		return fieldErr(ErrNDim, "dl_tensor.ndim", t.NDim, "must be 0.."+strconv.Itoa(MaxNDim))
	}
	if err := t.DType.Validate(); err != nil {
		return prefixed(err, "dl_tensor.")
	}
	if err := t.Device.Validate(); err != nil {
		return prefixed(err, "dl_tensor.")
	}
	if !legacy && flags&^knownFlags != 0 {
		return fieldErr(ErrFlags, "flags", "0x"+strconv.FormatUint(uint64(flags), 16), "bits unknown to DLPack "+CurrentVersion.String())
	}
	n := int(t.NDim)
	var shape, strides []int64
	if n > 0 {
		if t.Shape == nil {
			return fieldErr(ErrShape, "dl_tensor.shape", "NULL", "ndim is "+strconv.Itoa(n))
		}
		shape = unsafe.Slice(t.Shape, n)
		if t.Strides != nil {
			strides = unsafe.Slice(t.Strides, n)
		} else if !legacy && (version.Major > 1 || version.Minor >= 2) {
			return fieldErr(ErrStrides, "dl_tensor.strides", "NULL", "required from DLPack 1.2 on, tensor says "+version.String())
		}
	}
	if cap(dims) < 2*n {
		dims = make([]int64, 2*n)
	}
	var err error
	if c.extent, err = checkDims(shape, strides, dims[:n:n], dims[n:2*n:2*n], "dl_tensor."); err != nil {
		return err
	}
	c.ndim, c.shape, c.strides = n, dims[:n:n], dims[n:2*n:2*n]
	if t.Data == 0 {
		if c.numel > 0 {
			return fieldErr(ErrNullData, "dl_tensor.data", "NULL", strconv.FormatInt(c.numel, 10)+" elements")
		}
		return nil
	}
	if t.ByteOffset > math.MaxInt64 {
		return fieldErr(ErrOverflow, "dl_tensor.byte_offset", t.ByteOffset, "above int64")
	}
	first, carry := bits.Add64(uint64(t.Data), t.ByteOffset, 0)
	if carry != 0 || first > uint64(^uintptr(0)) {
		return fieldErr(ErrOverflow, "dl_tensor.byte_offset", t.ByteOffset, "data + byte_offset overflows the address space")
	}
	lo, hi, ok := c.byteSpan(t.DType, flags&FlagSubbyteTypePadded != 0)
	if !ok {
		return fieldErr(ErrOverflow, "dl_tensor.strides", clone(c.strides), "byte extent overflows int64")
	}
	// The touched range [first+lo, first+hi) must not wrap around.
	if lo < 0 && uint64(-lo) > first {
		return fieldErr(ErrOverflow, "dl_tensor.strides", clone(c.strides), "lowest element lies below address 0")
	}
	if _, carry := bits.Add64(first, uint64(hi), 0); carry != 0 {
		return fieldErr(ErrOverflow, "dl_tensor.strides", clone(c.strides), "highest element lies past the address space")
	}
	c.data = uintptr(first)
	return nil
}

// prefixed adds a prefix to the field name of a *FieldError.
func prefixed(err error, prefix string) error {
	if fe, ok := err.(*FieldError); ok {
		c := *fe
		c.Field = prefix + c.Field
		return &c
	}
	return err
}

// clone copies a slice for an error value: errors outlive the tensor, whose
// memory (or our reused storage) the original slice may point into.
func clone(v []int64) []int64 { return append([]int64{}, v...) }
