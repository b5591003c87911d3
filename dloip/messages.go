package dloip

import (
	"fmt"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ModelInferRequest and ModelInferResponse carry each tensor as one
// bytes field (raw_input_contents, raw_output_contents), which the
// shared wire layer reads and writes itself (dlgrpc.Decode,
// dlgrpc.Writer): sending, from the producer's own memory; receiving,
// straight into aligned memory. So does ModelStreamInferResponse, which
// wraps a ModelInferResponse (dlgrpc.DecodePath, Writer.Nested). Every
// other message goes to protobuf.

// The raw-contents field numbers, and the field of a stream's response
// that holds a ModelInferResponse.
const (
	fieldRawInput       protowire.Number = 7 // ModelInferRequest.raw_input_contents
	fieldRawOutput      protowire.Number = 6 // ModelInferResponse.raw_output_contents
	fieldStreamResponse protowire.Number = 2 // ModelStreamInferResponse.infer_response
)

// inInfer is a received ModelInferRequest, ModelInferResponse or
// ModelStreamInferResponse: msg without its raw contents, which are
// raws, each a 64-byte aligned buffer of alloc (an empty one for an
// empty entry) that is freed once no Tensor uses it.
type inInfer struct {
	msg proto.Message
	// path: the raw-contents field, after the field that holds its
	// message in msg, if any
	path  []protowire.Number
	alloc dlgrpc.Allocator
	// limit bounds the bytes of the raw contents together (negative: no
	// bound); total is what arrived.
	limit, total int64
	raws         [][]byte
	taken        []bool
	// err is the error UnmarshalWire met: a malformed message, or one
	// beyond a limit. UnmarshalWire keeps it here and returns nil, for
	// the caller to answer with the status it has: gRPC would answer any
	// error of a codec with codes.Internal.
	err error
}

func newInInfer(msg proto.Message, field protowire.Number, alloc dlgrpc.Allocator, limit int64) *inInfer {
	return &inInfer{msg: msg, path: []protowire.Number{field}, alloc: alloc, limit: limit}
}

// newInStream is a ModelStreamInferResponse to receive.
func newInStream(alloc dlgrpc.Allocator, limit int64) *inInfer {
	return &inInfer{msg: new(pb.ModelStreamInferResponse), path: []protowire.Number{fieldStreamResponse, fieldRawOutput}, alloc: alloc, limit: limit}
}

func (f *inInfer) UnmarshalWire(data mem.BufferSlice) error {
	if err := dlgrpc.DecodePath(data, f.path, f.body, f.msg); err != nil {
		f.freeRest()
		f.err = err
	}
	return nil
}

// body gives the next raw entry of n bytes its buffer, within the limit.
func (f *inInfer) body(n int) ([]byte, error) {
	if f.total += int64(n); f.limit >= 0 && f.total > f.limit {
		return nil, fmt.Errorf("%w: raw contents entry %d brings them to %d bytes, and MaxTensorBytes is %d", ErrLimit, len(f.raws), f.total, f.limit)
	}
	b := []byte{}
	if n > 0 {
		b = f.alloc.Allocate(n)
	}
	f.raws = append(f.raws, b)
	f.taken = append(f.taken, false)
	return b, nil
}

// take hands raw entry k to a Tensor, with the function that frees it.
func (f *inInfer) take(k int) ([]byte, func()) {
	f.taken[k] = true
	b := f.raws[k]
	if len(b) == 0 {
		return b, nil
	}
	return b, func() { f.alloc.Free(b) }
}

// freeRest frees the raw entries no Tensor took.
func (f *inInfer) freeRest() {
	for k, b := range f.raws {
		if !f.taken[k] && len(b) > 0 {
			f.alloc.Free(b)
		}
		f.taken[k] = true
	}
}

// outInfer is a ModelInferRequest or ModelInferResponse to send, its raw
// contents written from their own memory.
type outInfer struct {
	w *dlgrpc.Writer
	// once, when set, drops the hold's first reference once the message
	// is marshalled (a server's response, which gRPC marshals after the
	// handler returns).
	once *dlgrpc.Once
	// err is the error Marshal met (a mapped file cut short), for the
	// caller, which gRPC only hands a status.
	err error
}

// newOutInfer makes the message msg with the raw contents raws in
// field; mapped[i] marks raws[i] as lying in a file mapping (copied
// under a fault guard). With hold, large raws go to gRPC without a copy.
func newOutInfer(msg proto.Message, field protowire.Number, raws [][]byte, mapped []bool, hold *dlgrpc.Hold) *outInfer {
	w := dlgrpc.NewWriter(hold)
	writeInfer(w, msg, field, raws, mapped)
	return &outInfer{w: w}
}

// streamWriter writes the ModelStreamInferResponse that wraps msg, a
// ModelInferResponse whose raw contents are raws, as newOutInfer writes
// msg, or that says errMessage (then msg has no outputs).
func streamWriter(errMessage string, msg *pb.ModelInferResponse, raws [][]byte, mapped []bool, hold *dlgrpc.Hold) *dlgrpc.Writer {
	w := dlgrpc.NewWriter(hold)
	if errMessage != "" {
		w.Message(&pb.ModelStreamInferResponse{ErrorMessage: errMessage})
	}
	writeInfer(w.Nested(fieldStreamResponse), msg, fieldRawOutput, raws, mapped)
	return w
}

// marshalled is a message already marshalled: a stream marshals each
// of its messages before it hands it to gRPC, so that an error in
// marshalling (a mapped file cut short) or a message beyond the limit
// fails that message alone; gRPC would end the stream.
type marshalled mem.BufferSlice

func (m marshalled) MarshalWire() (mem.BufferSlice, error) { return mem.BufferSlice(m), nil }

// writeInfer adds msg and its raw contents raws in field to w.
func writeInfer(w *dlgrpc.Writer, msg proto.Message, field protowire.Number, raws [][]byte, mapped []bool) {
	w.Message(msg)
	for i, r := range raws {
		var m []byte
		if i < len(mapped) && mapped[i] {
			m = r
		}
		w.Tensor(field, [][]byte{r}, m)
	}
}

func (f *outInfer) MarshalWire() (mem.BufferSlice, error) {
	defer f.once.Drop()
	b, err := f.w.Marshal()
	if err != nil {
		f.err = err
	}
	return b, err
}
