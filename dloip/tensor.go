package dloip

import (
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// Align is the alignment of every received tensor's data that a Tensor
// shares: JAX aliases CPU memory only at 64 bytes.
const Align = dlgrpc.Align

// Tensor is a tensor received over the protocol: an output that
// Client.Infer returns, or an input a Model is given. It is a received
// dlgrpc.Tensor (a CPU tensor, a dlpack.Source and a dlpack.Producer
// sharing its memory) with the protocol's name, datatype and parameters:
//
//   - raw contents: the 64-byte aligned buffer that the bytes were
//     copied into, once, out of gRPC's frame buffers (see the package
//     documentation); the memory is the receiver's alone, so the tensor
//     is writable;
//   - typed contents (InferTensorContents, as some peers send): a buffer
//     the values were decoded into, once; IsCopied reports it;
//   - shared memory: the registered region itself (read-only), which
//     stays mapped while the Tensor or any export of it is alive.
//
// Memory whose first element is not at a multiple of Align (a
// shared-memory offset a peer chose) is not shared: DescribeTensor
// refuses it (dlpack.ErrAlignment) and DLPack answers with a copy
// carrying dlpack.FlagIsCopied, or refuses under dlpack.CopyNever.
type Tensor struct {
	*dlgrpc.Tensor
	name     string
	datatype string
	params   Parameters
	copied   bool
	// a BYTES tensor's shape and elements; the embedded Tensor holds
	// their memory as bytes
	bshape []int64
	elems  [][]byte
}

// newTensor makes a Tensor of data, which must hold exactly a tensor of
// datatype and shape; what names the tensor in errors ("input",
// "output"). release, when set, runs once when the Tensor and its
// exports are released; on error it is not run.
func newTensor(what, name, datatype string, shape []int64, data []byte, readOnly bool, release func()) (*Tensor, error) {
	dt, err := ParseDatatype(datatype)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	n, err := byteSize(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	if int64(len(data)) != n {
		return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: byte length", what, name), Value: len(data), Err: ErrInvalid,
			Why: fmt.Sprintf("%s %v needs %d bytes", datatype, shape, n)}
	}
	t, err := dlgrpc.NewTensor(dt, shape, data, readOnly, release)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	return &Tensor{Tensor: t, name: name, datatype: datatype}, nil
}

// Name is the tensor's name in the request or response.
func (t *Tensor) Name() string { return t.name }

// Datatype is the protocol datatype ("FP32", ...).
func (t *Tensor) Datatype() string { return t.datatype }

// Parameters are the tensor's protocol parameters as received (nil when
// none).
func (t *Tensor) Parameters() Parameters { return t.params }

// IsCopied reports whether the values arrived as typed contents and were
// decoded into a buffer of their own, rather than as raw bytes.
func (t *Tensor) IsCopied() bool { return t.copied }

// Shape is a copy of the shape.
func (t *Tensor) Shape() []int64 {
	if t.datatype == BYTES {
		return append([]int64(nil), t.bshape...)
	}
	return t.Tensor.Shape()
}

// Elements are the byte strings of a BYTES tensor, in row-major order,
// sharing the received memory (valid until the Tensor is closed); nil
// for any other datatype. Bytes of a BYTES tensor is its raw contents:
// each element's length, 4 bytes little-endian, then its bytes (nil when
// it arrived as bytes_contents).
func (t *Tensor) Elements() [][]byte { return t.elems }

// DataType is the element type (the zero DataType for BYTES).
func (t *Tensor) DataType() dlpack.DataType {
	if t.datatype == BYTES {
		return dlpack.DataType{}
	}
	return t.Tensor.DataType()
}

// DescribeTensor implements dlpack.Source; a BYTES tensor has no DLPack
// form (ErrDatatype).
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	if t.datatype == BYTES {
		return t.noDLPack()
	}
	return t.Tensor.DescribeTensor(d)
}

// DLPack implements dlpack.Producer; a BYTES tensor has no DLPack form
// (ErrDatatype).
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if t.datatype == BYTES {
		return dlpack.Managed{}, t.noDLPack()
	}
	return t.Tensor.DLPack(req)
}

func (t *Tensor) noDLPack() error {
	return &dlpack.FieldError{Field: fmt.Sprintf("%q: datatype", t.name), Value: BYTES, Err: ErrDatatype, Why: "a tensor of byte strings has no DLPack element type (Elements gives them)"}
}
