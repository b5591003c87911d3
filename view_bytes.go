package dlpack

import "unsafe"

// ReadOnlyBytes returns the bytes a CPU tensor occupies, from the lowest
// byte of any of its elements to the highest, as a slice sharing the
// producer's memory, and first, the index in that slice of the first byte
// of the tensor's first element (index 0 in every dimension). It accepts
// any data type, any strides (zero and negative included) and any
// alignment: it is the way to read a tensor whose elements are misaligned
// for their Go type, which Slice, Span and ViewOf refuse (ErrAlignment).
// Decode such elements from the bytes, for example with encoding/binary.
//
// For a type of whole bytes, element (i, j, ...) starts at byte
// first + (i*Stride(0) + j*Stride(1) + ...)*DataType().ItemSize(). For a
// sub-byte type, element k of a compact tensor starts at bit k*Bits*Lanes
// counted from byte first (packed), or at byte first + k*Lanes with
// FlagSubbyteTypePadded. Bytes between elements belong to the producer's
// buffer, not necessarily to the tensor.
//
// The caller promises not to write through the slice, whatever the
// tensor's flags (Go has no read-only slices). Like a slice from Slice, it
// is valid until the tensor is closed and does not keep the Foreign
// alive. An empty tensor gives nil and 0. It fails with ErrDevice for
// memory the CPU cannot read and ErrClosed after Close.
func ReadOnlyBytes(f Foreign) (b []byte, first int, err error) {
	s := f.live()
	if s == nil {
		return nil, 0, ErrClosed
	}
	c := &s.c
	if !s.hostOK {
		return nil, 0, fieldErr(ErrDevice, "dl_tensor.device", c.device, "the CPU cannot read this memory (AllowHostMemory permits CUDAHost, ROCMHost, TPUHost, CUDAManaged)")
	}
	if c.numel == 0 {
		return nil, 0, nil
	}
	// Import checked this span: it fits in int64 and in the address space.
	lo, hi, ok := c.byteSpan(c.dtype, c.flags&FlagSubbyteTypePadded != 0)
	if !ok {
		return nil, 0, fieldErr(ErrOverflow, "dl_tensor.strides", clone(c.strides), "byte extent overflows int64")
	}
	var p unsafe.Pointer
	if s.goBase != nil {
		p = unsafe.Add(s.goBase, s.goOff)
	} else {
		p = *(*unsafe.Pointer)(unsafe.Pointer(&c.data))
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, lo)), hi-lo), int(-lo), nil
}
