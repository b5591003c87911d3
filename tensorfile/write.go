package tensorfile

import (
	"io"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
)

// checkSource refuses, before anything is written, tensors the writers
// cannot read: memory the CPU cannot read, types without a Go element.
func checkSource(f dlpack.Foreign) error {
	if f.Device().Type != dlpack.CPU {
		return fieldErr(dlpack.ErrDevice, "device", f.Device(), "the writers read CPU memory only")
	}
	if _, ok := goElement[f.DataType()]; !ok && !oneByte(f.DataType()) {
		return fieldErr(ErrDType, "dtype", f.DataType(), "no Go element type to write it with")
	}
	return nil
}

// goElement lists the types writeElements writes.
var goElement = map[dlpack.DataType]bool{
	dlpack.Bool: true, dlpack.Int8: true, dlpack.Int16: true, dlpack.Int32: true, dlpack.Int64: true,
	dlpack.Uint8: true, dlpack.Uint16: true, dlpack.Uint32: true, dlpack.Uint64: true,
	dlpack.Float16: true, dlpack.BFloat16: true, dlpack.Float32: true, dlpack.Float64: true,
	dlpack.Complex64: true, dlpack.Complex128: true, dlpack.Float8E4M3FN: true, dlpack.Float8E5M2: true,
}

// oneByte reports whether dt's elements are single bytes: those without a
// Go element type (float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu) are
// written as the bytes they are.
func oneByte(dt dlpack.DataType) bool { return dt.ItemSize() == 1 }

// byteSource describes a Foreign of one-byte elements as uint8.
type byteSource struct{ f dlpack.Foreign }

func (s byteSource) DescribeTensor(d *dlpack.Description) error {
	err := s.f.DescribeTensor(d)
	d.DType = dlpack.Uint8
	return err
}

func (s byteSource) DLPackDevice() dlpack.Device { return s.f.Device() }

func (s byteSource) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(s, req)
}

// writeElements writes the elements of f to w in row-major order, as the
// little-endian bytes of the host (the package supports little-endian hosts
// only, as the formats are little-endian). Compact tensors are written in
// one call straight from their memory; others element by element.
func writeElements(w io.Writer, f dlpack.Foreign) error {
	switch f.DataType() {
	case dlpack.Bool:
		return writeTyped[bool](w, f)
	case dlpack.Int8:
		return writeTyped[int8](w, f)
	case dlpack.Int16:
		return writeTyped[int16](w, f)
	case dlpack.Int32:
		return writeTyped[int32](w, f)
	case dlpack.Int64:
		return writeTyped[int64](w, f)
	case dlpack.Uint8:
		return writeTyped[uint8](w, f)
	case dlpack.Uint16:
		return writeTyped[uint16](w, f)
	case dlpack.Uint32:
		return writeTyped[uint32](w, f)
	case dlpack.Uint64:
		return writeTyped[uint64](w, f)
	case dlpack.Float16:
		return writeTyped[minifloat.Float16](w, f)
	case dlpack.BFloat16:
		return writeTyped[minifloat.BFloat16](w, f)
	case dlpack.Float32:
		return writeTyped[float32](w, f)
	case dlpack.Float64:
		return writeTyped[float64](w, f)
	case dlpack.Complex64:
		return writeTyped[complex64](w, f)
	case dlpack.Complex128:
		return writeTyped[complex128](w, f)
	case dlpack.Float8E4M3FN:
		return writeTyped[minifloat.E4M3FN](w, f)
	case dlpack.Float8E5M2:
		return writeTyped[minifloat.E5M2](w, f)
	}
	if oneByte(f.DataType()) {
		b, err := dlpack.From(byteSource{f})
		if err != nil {
			return err
		}
		defer b.Close()
		return writeTyped[uint8](w, b)
	}
	return fieldErr(ErrDType, "dtype", f.DataType(), "no Go element type to write it with")
}

func writeTyped[T dlpack.Element](w io.Writer, f dlpack.Foreign) error {
	// A tensor in a mapping (a File's own, or a Foreign of one) is read
	// under a fault guard, into a chunk of Go memory that is then written:
	// a fault can only happen in this function's copy, never inside w.
	if b, _, err := dlpack.ReadOnlyBytes(f); err == nil && len(b) > 0 {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if m, ok := mappedAt(p, uintptr(len(b))); ok {
			return guardMapped("data", m, p, uintptr(len(b)), func() error { return streamTyped[T](w, f, true) })
		}
	}
	return streamTyped[T](w, f, false)
}

// writeChunk is the size of the chunks in which mapped tensors are copied
// before they are written.
const writeChunk = 1 << 20

// streamTyped writes f's elements to w: a compact tensor in one call
// straight from its memory unless bounce (then in writeChunk copies), a
// strided one element by element through a 4 KiB chunk.
func streamTyped[T dlpack.Element](w io.Writer, f dlpack.Foreign, bounce bool) error {
	var z T
	size := int(unsafe.Sizeof(z))
	if f.IsContiguous() {
		xs, err := dlpack.ReadOnlySlice[T](f)
		if err != nil {
			return err
		}
		if len(xs) == 0 {
			return nil
		}
		data := unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*size)
		if !bounce {
			_, err = w.Write(data)
			return err
		}
		chunk := make([]byte, min(len(data), writeChunk))
		for len(data) > 0 {
			n := copy(chunk, data)
			if _, err := w.Write(chunk[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return err
	}
	var chunk [4096]byte
	n := 0
	for _, x := range v.All() {
		if n+size > len(chunk) {
			if _, err := w.Write(chunk[:n]); err != nil {
				return err
			}
			n = 0
		}
		n += copy(chunk[n:], unsafe.Slice((*byte)(unsafe.Pointer(&x)), size))
	}
	if n > 0 {
		_, err = w.Write(chunk[:n])
	}
	return err
}
