package dloip

import (
	"context"
	"errors"
	"testing"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// fuzzServer is a server (never serving) whose models the fuzzed
// requests are checked against: a fixed and a variable shape, every
// datatype.
var fuzzServer = func() *Server {
	s := NewServer(Options{MaxTensorBytes: 1 << 20, Logger: quiet})
	var ins []TensorMetadata
	for _, d := range append(Datatypes(), BYTES) {
		ins = append(ins, TensorMetadata{Name: "x_" + d, Datatype: d, Shape: []int64{-1, 2}})
	}
	for _, m := range []Model{echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}, TensorMetadata{Name: "b", Datatype: "INT8", Shape: []int64{2, 2}}),
		echoModel("all", ins...), dynamicEcho()} {
		if err := s.Register(m); err != nil {
			panic(err)
		}
	}
	return s
}()

func fuzzSeeds(f *testing.F, msgs ...proto.Message) {
	for _, m := range msgs {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
}

// FuzzInferRequest: any bytes a client sends as a ModelInferRequest are
// read as protobuf reads them (the same message, or refused with
// dlgrpc.ErrMalformed), then checked against the models: the request is
// refused with an error, or every input holds exactly the bytes its
// shape needs, and what it allocated comes back when it is released.
// Nothing a request only declares is allocated: the allocation is
// bounded by the message's own size.
func FuzzInferRequest(f *testing.F) {
	fuzzSeeds(f,
		&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "FP32", 2), in("b", "INT8", 2, 2)}, RawInputContents: [][]byte{make([]byte, 8), make([]byte, 4)}},
		&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "a", Datatype: "FP32", Shape: []int64{1 << 28}}, {Name: "b", Datatype: "INT8", Shape: []int64{2, 2}, Contents: &pb.InferTensorContents{IntContents: []int32{1, 2, 3, 4}}}}},
		&pb.ModelInferRequest{ModelName: "all", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("x_BOOL", "BOOL", 1, 2), in("x_FP16", "FP16", 3, 2)}, RawInputContents: [][]byte{{1, 0}, make([]byte, 12)}},
		&pb.ModelInferRequest{ModelName: "echo", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("s", BYTES, 2), in("t", "INT8", 1)}, RawInputContents: [][]byte{{1, 0, 0, 0, 'a', 0, 0, 0, 0}, {5}}},
		&pb.ModelInferRequest{ModelName: "echo", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: BYTES, Shape: []int64{2}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{{1}, {}}}}}},
	)
	for _, h := range hostileRequests() {
		f.Add(h.wire)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		alloc := &countingAllocator{}
		var heap dlgrpctest.Heap
		a := heap.Allocated()
		in := newInInfer(new(pb.ModelInferRequest), fieldRawInput, alloc, fuzzServer.opts.MaxTensorBytes)
		if err := in.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
			t.Fatal(err)
		}
		var want pb.ModelInferRequest
		if errWant := proto.Unmarshal(b, &want); (errWant == nil) != (in.err == nil) {
			t.Fatalf("protobuf says %v, the message %v", errWant, in.err)
		}
		if in.err != nil {
			if alloc.out.Load() != 0 {
				t.Fatalf("a refused message holds %d bytes", alloc.out.Load())
			}
			return
		}
		r := in.msg.(*pb.ModelInferRequest)
		m, err := fuzzServer.model(context.Background(), dlgrpc.OpInfer, r.GetModelName(), r.GetModelVersion())
		if err != nil {
			in.freeRest()
		} else if req, err := fuzzServer.request(context.Background(), m, r, in); err == nil {
			for _, x := range req.Inputs {
				if x.Datatype() == BYTES {
					if n, _ := elements(x.Shape()); int64(len(x.Elements())) != n {
						t.Fatalf("input %q holds %d elements for %v", x.Name(), len(x.Elements()), x.Shape())
					}
				} else if n, _ := byteSize(x.DataType(), x.Shape()); int64(len(x.Bytes())) != n {
					t.Fatalf("input %q holds %d bytes for %v %v", x.Name(), len(x.Bytes()), x.Datatype(), x.Shape())
				}
				x.Close()
			}
		}
		in.freeRest()
		if alloc.out.Load() != 0 {
			t.Fatalf("%d bytes of raw contents held after release", alloc.out.Load())
		}
		if got := heap.Allocated() - a; got > uint64(64*len(b))+1<<20 {
			t.Fatalf("a message of %d bytes made the server allocate %d", len(b), got)
		}
	})
}

// FuzzInferResponse: any bytes a server answers as a ModelInferResponse
// are read as protobuf reads them, then checked: the response is
// refused with an error, or every output holds exactly the bytes its
// shape needs; what it allocated comes back when it is released, and
// the allocation is bounded by the message's own size.
func FuzzInferResponse(f *testing.F) {
	fuzzSeeds(f,
		&pb.ModelInferResponse{ModelName: "m", Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2}}}, RawOutputContents: [][]byte{make([]byte, 8)}},
		&pb.ModelInferResponse{ModelName: "m", Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "INT16", Shape: []int64{3}, Contents: &pb.InferTensorContents{IntContents: []int32{-1, 2, -300}}}}},
		&pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "r", Datatype: "FP32", Shape: []int64{2}}}, RawOutputContents: [][]byte{{}}},
		&pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "s", Datatype: BYTES, Shape: []int64{2}}}, RawOutputContents: [][]byte{{1, 0, 0, 0, 'a', 0, 0, 0, 0}}},
	)
	for _, h := range hostileResponses() {
		f.Add(h.wire)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		alloc := &countingAllocator{}
		c := &Client{opts: dlgrpc.ClientOptions{MaxTensorBytes: 1 << 20, Allocator: alloc}}
		var heap dlgrpctest.Heap
		a := heap.Allocated()
		in := newInInfer(new(pb.ModelInferResponse), fieldRawOutput, alloc, c.opts.MaxTensorBytes)
		if err := in.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
			t.Fatal(err)
		}
		var want pb.ModelInferResponse
		if errWant := proto.Unmarshal(b, &want); (errWant == nil) != (in.err == nil) {
			t.Fatalf("protobuf says %v, the message %v", errWant, in.err)
		}
		if in.err == nil {
			req := &InferRequest{Model: "m", Outputs: []RequestedOutput{{Name: "r", Region: "r", Memory: make([]byte, 64)}}}
			if resp, err := c.responseOf(req, in.msg.(*pb.ModelInferResponse), in); err == nil {
				for _, y := range resp.Outputs {
					if y.Datatype() == BYTES {
						if n, _ := elements(y.Shape()); int64(len(y.Elements())) != n {
							t.Fatalf("output %q holds %d elements for %v", y.Name(), len(y.Elements()), y.Shape())
						}
					} else if n, _ := byteSize(y.DataType(), y.Shape()); int64(len(y.Bytes())) != n {
						t.Fatalf("output %q holds %d bytes for %v %v", y.Name(), len(y.Bytes()), y.Datatype(), y.Shape())
					}
				}
				resp.Close()
			}
		}
		if alloc.out.Load() != 0 {
			t.Fatalf("%d bytes of raw contents held after release", alloc.out.Load())
		}
		if got := heap.Allocated() - a; got > uint64(64*len(b))+1<<20 {
			t.Fatalf("a message of %d bytes made the client allocate %d", len(b), got)
		}
	})
}

// FuzzStreamResponse: any bytes a server answers on a stream are read
// as protobuf reads a ModelStreamInferResponse, then checked as a
// client's Recv checks them: an error answer is an error naming the
// request, anything else a response whose every output holds exactly
// the bytes its shape needs, or an error; what was allocated comes back
// when it is released, and the allocation is bounded by the message's
// own size.
func FuzzStreamResponse(f *testing.F) {
	y := []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2}}}
	fuzzSeeds(f,
		&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{ModelName: "m", Outputs: y, RawOutputContents: [][]byte{make([]byte, 8)}, Parameters: finalParam(true)}},
		&pb.ModelStreamInferResponse{ErrorMessage: "failed", InferResponse: &pb.ModelInferResponse{Id: "r", Outputs: y, RawOutputContents: [][]byte{make([]byte, 8)}}},
		&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "s", Datatype: BYTES, Shape: []int64{2}}}, RawOutputContents: [][]byte{{1, 0, 0, 0, 'a', 0, 0, 0, 0}}}},
	)
	for _, h := range hostileStreamResponses() {
		f.Add(h.wire)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		alloc := &countingAllocator{}
		c := &Client{opts: dlgrpc.ClientOptions{MaxTensorBytes: 1 << 20, Allocator: alloc}}
		var heap dlgrpctest.Heap
		a := heap.Allocated()
		in := newInStream(alloc, c.opts.MaxTensorBytes)
		if err := in.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
			t.Fatal(err)
		}
		var want pb.ModelStreamInferResponse
		if errWant := proto.Unmarshal(b, &want); (errWant == nil) != (in.err == nil) {
			t.Fatalf("protobuf says %v, the message %v", errWant, in.err)
		}
		resp, err := c.streamResponse(in)
		var re *ResponseError
		switch {
		case err == nil:
			if want.GetErrorMessage() != "" {
				t.Fatalf("the error answer %q read as a response", want.GetErrorMessage())
			}
			for _, y := range resp.Outputs {
				if y.Datatype() == BYTES {
					if n, _ := elements(y.Shape()); int64(len(y.Elements())) != n {
						t.Fatalf("output %q holds %d elements for %v", y.Name(), len(y.Elements()), y.Shape())
					}
				} else if n, _ := byteSize(y.DataType(), y.Shape()); int64(len(y.Bytes())) != n {
					t.Fatalf("output %q holds %d bytes for %v %v", y.Name(), len(y.Bytes()), y.Datatype(), y.Shape())
				}
			}
			resp.Close()
		case errors.As(err, &re):
			if want.GetErrorMessage() == "" || re.Message != want.GetErrorMessage() || re.ID != want.GetInferResponse().GetId() {
				t.Fatalf("an error answer %q read as %v", want.GetErrorMessage(), re)
			}
		}
		if alloc.out.Load() != 0 {
			t.Fatalf("%d bytes of raw contents held after release", alloc.out.Load())
		}
		if got := heap.Allocated() - a; got > uint64(64*len(b))+1<<20 {
			t.Fatalf("a message of %d bytes made the client allocate %d", len(b), got)
		}
	})
}
