package dloip

import (
	"context"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
)

// TensorMetadata describes one input or output of a model: its name, its
// protocol datatype ("FP32", ...) and its shape, -1 for a dimension of
// variable size.
type TensorMetadata struct {
	Name     string
	Datatype string
	Shape    []int64
}

// ModelMetadata describes a model (the protocol's ModelMetadata).
type ModelMetadata struct {
	Name     string
	Versions []string
	Platform string
	Inputs   []TensorMetadata
	Outputs  []TensorMetadata
}

// ServerMetadata describes a server (the protocol's ServerMetadata).
type ServerMetadata struct {
	Name       string
	Version    string
	Extensions []string
}

// Input is a named tensor sent: an input of a Client.Infer. Tensor is
// any producer of a CPU tensor of a datatype the protocol has.
//
// With Region set, Tensor lies in that registered shared-memory region
// (Client.RegisterSystemSharedMemory), Offset bytes into it: its bytes
// are not sent, only the region, offset and byte size; Tensor still gives
// the datatype and shape.
type Input struct {
	Name       string
	Tensor     dlpack.Producer
	Parameters Parameters
	Region     string
	Offset     uint64
}

// Output is a named tensor a Model returns. Release, when set, is called
// once the server is done with Tensor: after it took its own reference
// (through dlpack.From, held until gRPC has written the bytes), or at
// once for an output not asked for or a call that failed; a model whose
// outputs have an owner to let go (a dlonnx.Output's Destroy) sets it.
type Output struct {
	Name       string
	Tensor     dlpack.Producer
	Parameters Parameters
	Release    func()
}

// Request is an inference request as a Model sees it: the inputs as
// received tensors, valid until Infer returns (an export made from one,
// through dlpack.From or DLPack, holds its memory for as long as it
// lives), and the names of the outputs asked for (all when empty).
type Request struct {
	Model      string
	Version    string
	ID         string
	Parameters Parameters
	Inputs     []*Tensor
	Outputs    []string
}

// Input is the input named name, nil when there is none.
func (r *Request) Input(name string) *Tensor {
	for _, t := range r.Inputs {
		if t.name == name {
			return t
		}
	}
	return nil
}

// Model is a model a Server serves. Metadata is read at Register and
// must not change afterwards. Infer is called with inputs already
// checked against the metadata (names, datatypes, shapes) and outputs that
// the metadata has; it may be called from many goroutines at once. The
// server takes each returned output asked for through dlpack.From and
// releases it once gRPC has written its bytes; an output not asked for
// is left untaken. An error is sent as its gRPC status when it has one, else as
// codes.Internal (codes.InvalidArgument when it wraps ErrInvalid,
// ErrDatatype or ErrShape).
type Model interface {
	Metadata() ModelMetadata
	Infer(ctx context.Context, req *Request) ([]Output, error)
}

// ModelFunc makes a Model of a plain Go function and the metadata that
// describes it.
func ModelFunc(meta ModelMetadata, fn func(ctx context.Context, req *Request) ([]Output, error)) Model {
	return funcModel{meta: meta, fn: fn}
}

type funcModel struct {
	meta ModelMetadata
	fn   func(ctx context.Context, req *Request) ([]Output, error)
}

func (m funcModel) Metadata() ModelMetadata { return m.meta }

func (m funcModel) Infer(ctx context.Context, req *Request) ([]Output, error) { return m.fn(ctx, req) }

func tensorMetaPB(ts []TensorMetadata) []*pb.ModelMetadataResponse_TensorMetadata {
	out := make([]*pb.ModelMetadataResponse_TensorMetadata, len(ts))
	for i, t := range ts {
		out[i] = &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
	}
	return out
}

func tensorMetaOf(ts []*pb.ModelMetadataResponse_TensorMetadata) []TensorMetadata {
	out := make([]TensorMetadata, len(ts))
	for i, t := range ts {
		out[i] = TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()}
	}
	return out
}
