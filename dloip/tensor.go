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
