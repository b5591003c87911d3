package dloip

import (
	"bytes"
	"testing"

	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The codec writes what protobuf-go writes (the raw contents after the
// other fields, which protobuf also does) and reads it back: a message
// marshalled by protobuf-go decodes to the same fields and raw contents,
// and one marshalled by the codec, zero-copy parts included, decodes with
// protobuf-go to the same message.
func TestCodecMatchesProtobuf(t *testing.T) {
	big := bytes.Repeat([]byte{7}, zeroCopyPart+3)
	msg := &pb.ModelInferRequest{ModelName: "m", Id: "7",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "UINT8", Shape: []int64{3}}, {Name: "b", Datatype: "UINT8", Shape: []int64{int64(len(big))}}},
		RawInputContents: [][]byte{{1, 2, 3}, big}}
	c := newCodec()
	h := newHolding(nil)
	head := proto.Clone(msg).(*pb.ModelInferRequest)
	head.RawInputContents = nil
	out, err := c.Marshal(&outInfer{msg: head, field: fieldRawInput, raws: msg.RawInputContents, keep: h})
	if err != nil {
		t.Fatal(err)
	}
	var back pb.ModelInferRequest
	if err := proto.Unmarshal(out.Materialize(), &back); err != nil || !proto.Equal(&back, msg) {
		t.Fatalf("protobuf-go reads the codec's message differently: %v", err)
	}
	out.Free()
	if h.refs.Load() != 1 {
		t.Fatalf("references %d after gRPC freed the buffers", h.refs.Load())
	}
	wire, _ := proto.Marshal(msg)
	in := &inInfer{msg: new(pb.ModelInferRequest), field: fieldRawInput}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, in); err != nil {
		t.Fatal(err)
	}
	in.msg.(*pb.ModelInferRequest).RawInputContents = in.raws
	if !proto.Equal(in.msg, msg) {
		t.Fatal("the codec reads protobuf-go's message differently")
	}
}

// FuzzUnmarshal: any bytes decode to a message or fail with an error,
// never a panic.
func FuzzUnmarshal(f *testing.F) {
	msg := &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{{0, 0, 128, 63}}}
	wire, _ := proto.Marshal(msg)
	f.Add(wire)
	f.Add([]byte{0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &inInfer{msg: new(pb.ModelInferRequest), field: fieldRawInput}
		_ = newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, in)
	})
}
