package dloip

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The messages write what protobuf-go writes (the raw contents after the
// other fields, which protobuf also does) and read it back: a message
// marshalled by protobuf-go decodes to the same fields and raw contents,
// and one marshalled here, zero-copy parts included, decodes with
// protobuf-go to the same message; gRPC's freeing of the zero-copy
// buffers drops their references.
func TestMessagesMatchProtobuf(t *testing.T) {
	big := bytes.Repeat([]byte{7}, dlgrpc.ZeroCopyPart+3)
	msg := &pb.ModelInferRequest{ModelName: "m", Id: "7",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "UINT8", Shape: []int64{3}}, {Name: "b", Datatype: "UINT8", Shape: []int64{int64(len(big))}}},
		RawInputContents: [][]byte{{1, 2, 3}, big}}
	released := 0
	h := dlgrpc.NewHold(func() { released++ }, nil)
	head := proto.Clone(msg).(*pb.ModelInferRequest)
	head.RawInputContents = nil
	out, err := newOutInfer(head, fieldRawInput, msg.RawInputContents, nil, h).MarshalWire()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 2 {
		t.Fatalf("%d buffers: the large raw entry was copied", len(out))
	}
	var back pb.ModelInferRequest
	if err := proto.Unmarshal(out.Materialize(), &back); err != nil || !proto.Equal(&back, msg) {
		t.Fatalf("protobuf-go reads the message differently: %v", err)
	}
	out.Free()
	h.Drop()
	if released != 1 {
		t.Fatalf("released %d times after gRPC freed the buffers and the maker dropped its reference", released)
	}
	wire, _ := proto.Marshal(msg)
	in := newInInfer(new(pb.ModelInferRequest), fieldRawInput, dlgrpc.DefaultAllocator, -1)
	if err := in.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(wire)}); err != nil || in.err != nil {
		t.Fatal(err, in.err)
	}
	in.msg.(*pb.ModelInferRequest).RawInputContents = in.raws
	if !proto.Equal(in.msg, msg) {
		t.Fatal("the message reads protobuf-go's differently")
	}
	for _, r := range in.raws {
		if len(r) > 0 && uintptr(unsafeAddr(r))%Align != 0 {
			t.Fatal("a raw entry is not 64-byte aligned")
		}
	}
}

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// A stream's response wraps a ModelInferResponse, and its raw contents
// go as the unary response's do: written from their own memory (the
// large one handed to gRPC as it is) into bytes protobuf-go reads as
// the message they stand for, and read back from protobuf-go's bytes
// into 64-byte aligned buffers.
func TestStreamMessagesMatchProtobuf(t *testing.T) {
	big := bytes.Repeat([]byte{9}, dlgrpc.ZeroCopyPart+5)
	inner := &pb.ModelInferResponse{ModelName: "m", Id: "7", Parameters: finalParam(true),
		Outputs:           []*pb.ModelInferResponse_InferOutputTensor{{Name: "a", Datatype: "UINT8", Shape: []int64{3}}, {Name: "b", Datatype: "UINT8", Shape: []int64{int64(len(big))}}},
		RawOutputContents: [][]byte{{1, 2, 3}, big}}
	released := 0
	h := dlgrpc.NewHold(func() { released++ }, nil)
	head := proto.Clone(inner).(*pb.ModelInferResponse)
	head.RawOutputContents = nil
	for _, errMessage := range []string{"", "it failed"} {
		out, err := streamWriter(errMessage, head, inner.RawOutputContents, nil, h).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		shared := false
		for _, b := range out {
			if d := b.ReadOnlyData(); len(d) > 0 && unsafe.SliceData(d) == unsafe.SliceData(big) {
				shared = true
			}
		}
		if !shared {
			t.Fatal("the large raw entry was copied")
		}
		want := &pb.ModelStreamInferResponse{ErrorMessage: errMessage, InferResponse: inner}
		var back pb.ModelStreamInferResponse
		if err := proto.Unmarshal(out.Materialize(), &back); err != nil || !proto.Equal(&back, want) {
			t.Fatalf("protobuf-go reads the message differently: %v", err)
		}
		out.Free()
		wire, _ := proto.Marshal(want)
		in := newInStream(dlgrpc.DefaultAllocator, -1)
		if err := in.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(wire)}); err != nil || in.err != nil {
			t.Fatal(err, in.err)
		}
		got := in.msg.(*pb.ModelStreamInferResponse)
		if len(in.raws) != 2 || !bytes.Equal(in.raws[1], big) || uintptr(unsafeAddr(in.raws[1]))%Align != 0 {
			t.Fatal("the raw entries read differently, or unaligned")
		}
		got.InferResponse.RawOutputContents = in.raws
		if !proto.Equal(got, want) {
			t.Fatal("the message reads protobuf-go's differently")
		}
		in.freeRest()
	}
	h.Drop()
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
}
