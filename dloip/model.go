package dloip

import (
	"context"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
)

// TensorMetadata describes one input or output of a model: its name, its
// protocol datatype ("FP32", "BYTES", ...) and its shape, one entry per
// dimension, -1 for a dimension of variable size ([]int64{} for a
// scalar; a nil Shape is refused by Register: the protocol has no way to
// say "any rank", and a model that takes tensors of any rank lists them
// not and sets ModelMetadata.Dynamic). What it says goes on the wire as
// it is: a variable dimension as -1.
//
// Datatype "" leaves the datatype to the request: any datatype is taken
// (it goes on the wire as "", which the protocol does not define, so
// clients read it as "not said"). Optional marks an input a request may
// leave out (Triton's optional inputs); it has no form on the wire.
type TensorMetadata struct {
	Name     string
	Datatype string
	Shape    []int64
	Optional bool
}

// ModelMetadata describes a model (the protocol's ModelMetadata).
//
// A Dynamic model takes what it is sent: inputs the metadata does not
// list come to Infer as they arrived (any name, datatype and shape), the
// listed ones checked as always, and it may return outputs the metadata
// does not list; a request that asks for no output gets every output
// Infer returns. A pass-through, an ensemble step or a router is one
// Dynamic model, whatever its callers send.
type ModelMetadata struct {
	Name     string
	Versions []string
	Platform string
	Inputs   []TensorMetadata
	Outputs  []TensorMetadata
	Dynamic  bool
}

// ServerMetadata describes a server (the protocol's ServerMetadata).
type ServerMetadata struct {
	Name       string
	Version    string
	Extensions []string
}

// Input is a named tensor sent: an input of a Client.Infer. Tensor is
// any producer of a CPU tensor of a datatype the protocol has, or a
// *BytesTensor (BYTES), or a received *Tensor handed on as it came.
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

// Request is an inference request as a Model sees it: every input the
// request carries, in its order, as received tensors (their names,
// datatypes and shapes as they came), valid until Infer returns (an
// export made from one, through dlpack.From or DLPack, holds its memory
// for as long as it lives), and the names of the outputs asked for (all
// when empty).
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
// checked against the metadata (names, datatypes, shapes, those not
// optional present) and outputs that the metadata has (any, for a
// Dynamic model); it may be called from many goroutines at once. The
// server takes each returned output asked for through dlpack.From and
// releases it once gRPC has written its bytes; an output not asked for
// is left untaken. An error is sent as its gRPC status when it has one,
// else as codes.Internal (codes.InvalidArgument when it wraps
// ErrInvalid, ErrDatatype or ErrShape). A panic in Infer fails that call
// alone with codes.Internal, reported to Options.Logger.
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

// tensorMetaOf reads a server's tensor metadata; a scalar's shape is
// []int64{}, never nil.
func tensorMetaOf(ts []*pb.ModelMetadataResponse_TensorMetadata) []TensorMetadata {
	out := make([]TensorMetadata, len(ts))
	for i, t := range ts {
		out[i] = TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: append([]int64{}, t.GetShape()...)}
	}
	return out
}

// StreamModel is a model that answers a request with any number of
// responses, as Triton's decoupled models do (an LLM that streams its
// tokens): Server.RegisterStream serves it on ModelStreamInfer, and
// refuses a ModelInfer of it (codes.Unimplemented), as Triton does.
//
// InferStream is called as Model.Infer is: with the request checked
// against the metadata, from many goroutines at once. It sends each
// response but the last with send, in order, and returns the last
// one's outputs: each response's parameter "triton_final_response" says
// whether it is the last. It may return no outputs (len 0): the request
// then ends with no response of its own, and the server sends an empty
// final response only when the request asked for it (the request
// parameter "triton_enable_empty_final_response", ParamEmptyFinal), as
// Triton does for a decoupled model's final flag sent alone; a client
// that did not ask cannot tell that the request ended. The outputs of
// each response are taken as Infer's are (those asked for, checked
// against the metadata, each Release run once its tensor is taken).
//
// send returns once the response is handed to gRPC; while the client
// does not read, it blocks (the server buffers nothing more: a model is
// slowed down to its reader's pace, and a reader that stops is cut
// after Options.StallTimeout). It may be called from any goroutine,
// one response at a time. It fails, and the model should then return,
// when the stream has ended, when the request has failed (an output
// that breaks the metadata: the server then answers the request with
// that error), and after InferStream has returned (dlpack.ErrClosed).
// An error InferStream returns is sent as the request's error response
// (the protocol's error_message), after the responses sent; the stream
// goes on. A panic in InferStream is such an error, reported to
// Options.Logger.
type StreamModel interface {
	Metadata() ModelMetadata
	InferStream(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error)
}

// StreamFunc makes a StreamModel of a plain Go function and the metadata
// that describes it.
func StreamFunc(meta ModelMetadata, fn func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error)) StreamModel {
	return funcStream{meta: meta, fn: fn}
}

type funcStream struct {
	meta ModelMetadata
	fn   func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error)
}

func (m funcStream) Metadata() ModelMetadata { return m.meta }

func (m funcStream) InferStream(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
	return m.fn(ctx, req, send)
}
