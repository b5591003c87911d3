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
