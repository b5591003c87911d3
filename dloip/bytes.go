package dloip

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// BYTES is the protocol's datatype of byte strings: prompts, tokenizer
// input, labels, JSON. Every LLM Triton serves takes and returns it. A
// BYTES tensor is a shape and one byte string per element, in row-major
// order; on the wire its raw contents are each element's length, 4 bytes
// little-endian, then its bytes (or bytes_contents, one entry per
// element).
const BYTES = "BYTES"

// BytesTensor is a tensor of byte strings to send (the protocol's BYTES):
// Elements in row-major order, one per element of Shape. It is a
// dlpack.Producer only so that it fits Input.Tensor and Output.Tensor:
// BYTES has no DLPack element type, so its DLPack fails with
// ErrDatatype. Sending it copies its elements once, into the raw layout.
type BytesTensor struct {
	Shape    []int64
	Elements [][]byte
}

// Strings makes a BytesTensor of strings, shape [len(s)].
func Strings(s ...string) *BytesTensor {
	b := &BytesTensor{Shape: []int64{int64(len(s))}, Elements: make([][]byte, len(s))}
	for i, e := range s {
		b.Elements[i] = []byte(e)
	}
	return b
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (b *BytesTensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer: it fails, BYTES having no DLPack
// element type.
func (b *BytesTensor) DLPack(dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Managed{}, &dlpack.FieldError{Field: "datatype", Value: BYTES, Err: ErrDatatype, Why: "a tensor of byte strings has no DLPack element type"}
}

// encode checks the elements against the shape and lays them out as the
// raw contents of BYTES: each element's length, 4 bytes little-endian,
// then its bytes.
func (b *BytesTensor) encode(field string) ([]byte, error) {
	n, err := elements(b.Shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if n != int64(len(b.Elements)) {
		return nil, &dlpack.FieldError{Field: field + ": elements", Value: len(b.Elements), Err: ErrShape,
			Why: fmt.Sprintf("shape %v has %d elements", b.Shape, n)}
	}
	size := 0
	for i, e := range b.Elements {
		if len(e) > math.MaxUint32 {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s: elements[%d]", field, i), Value: len(e), Err: ErrInvalid, Why: "an element of BYTES holds at most 2^32-1 bytes"}
		}
		size += 4 + len(e)
	}
	return appendBytes(make([]byte, 0, size), b.Elements), nil
}

// appendBytes appends elems to dst in the raw layout of BYTES.
func appendBytes(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// elements is the element count of shape, checked as byteSize checks.
func elements(shape []int64) (int64, error) { return byteSize(dlpack.Uint8, shape) }

// splitBytes splits raw, the raw contents of a BYTES tensor of shape,
// into its elements, which share raw. Every length is checked against
// what raw holds: the count of elements first (each takes 4 bytes at
// least), before the slice of them is allocated, then each length, and
// the elements must use raw whole.
func splitBytes(field string, shape []int64, raw []byte) ([][]byte, error) {
	n, err := elements(shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if n > int64(len(raw)/4) {
		return nil, &dlpack.FieldError{Field: field + ": byte length", Value: len(raw), Err: ErrInvalid,
			Why: fmt.Sprintf("BYTES %v has %d elements, each a 4-byte length at least", shape, n)}
	}
	out := make([][]byte, n)
	at := 0
	for i := range out {
		if len(raw)-at < 4 {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s: element %d", field, i), Value: len(raw) - at, Err: ErrInvalid, Why: "bytes left, not a 4-byte length"}
		}
		m := binary.LittleEndian.Uint32(raw[at:])
		at += 4
		if uint64(m) > uint64(len(raw)-at) {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s: element %d: length", field, i), Value: m, Err: ErrInvalid,
				Why: fmt.Sprintf("%d bytes are left", len(raw)-at)}
		}
		out[i] = raw[at : at+int(m) : at+int(m)]
		at += int(m)
	}
	if at != len(raw) {
		return nil, &dlpack.FieldError{Field: field + ": byte length", Value: len(raw), Err: ErrInvalid,
			Why: fmt.Sprintf("the %d elements of BYTES %v take %d bytes", n, shape, at)}
	}
	return out, nil
}

// newBytesTensor makes a received BYTES Tensor of shape: elems, whose
// memory raw (the raw contents, nil for typed contents) holds; release,
// when set, runs once when the Tensor and its holds are released.
func newBytesTensor(name string, shape []int64, raw []byte, elems [][]byte, readOnly bool, release func()) (*Tensor, error) {
	base, err := dlgrpc.NewTensor(dlpack.Uint8, []int64{int64(len(raw))}, raw, readOnly, release)
	if err != nil {
		return nil, err
	}
	return &Tensor{Tensor: base, name: name, datatype: BYTES, bshape: append([]int64{}, shape...), elems: elems}, nil
}
