package dloip

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// rawClient speaks to a server with protobuf-go's own codec, to send
// messages a dloip Client would never make.
func rawClient(t testing.TB, addr string) pb.GRPCInferenceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<30), grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

func in(name, datatype string, shape ...int64) *pb.ModelInferRequest_InferInputTensor {
	return &pb.ModelInferRequest_InferInputTensor{Name: name, Datatype: datatype, Shape: shape}
}

// Every malformed request gets InvalidArgument (or the status the
// protocol names) with a message naming the input and the value, and the
// server serves on.
func TestHostileRequests(t *testing.T) {
	_, addr := serve(t, Options{MaxMessageBytes: 1 << 20, MaxTensorBytes: 64 << 10},
		echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}, TensorMetadata{Name: "b", Datatype: "INT8", Shape: []int64{2, 2}}))
	rc := rawClient(t, addr)
	good := func() *pb.ModelInferRequest {
		return &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "FP32", 2), in("b", "INT8", 2, 2)},
			RawInputContents: [][]byte{make([]byte, 8), make([]byte, 4)}}
	}
	cases := []struct {
		name  string
		edit  func(r *pb.ModelInferRequest)
		code  codes.Code
		parts []string
	}{
		{"byte length", func(r *pb.ModelInferRequest) { r.RawInputContents[0] = make([]byte, 7) },
			codes.InvalidArgument, []string{`input "a"`, "byte length = 7", "needs 8 bytes"}},
		{"negative dim", func(r *pb.ModelInferRequest) { r.Inputs[0].Shape = []int64{-3} },
			codes.InvalidArgument, []string{`input "a"`, "shape[0] = -3"}},
		{"overflowing dims", func(r *pb.ModelInferRequest) { r.Inputs[0].Shape = []int64{1 << 40, 1 << 40} },
			codes.InvalidArgument, []string{`input "a"`, "overflows"}},
		{"unknown datatype", func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "FP8" },
			codes.InvalidArgument, []string{`input "a"`, "datatype = FP8"}},
		{"BYTES", func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "BYTES" },
			codes.InvalidArgument, []string{`input "a": datatype = BYTES`, "takes FP32"}},
		{"wrong datatype", func(r *pb.ModelInferRequest) { r.Inputs[0].Datatype = "FP64" },
			codes.InvalidArgument, []string{`input "a": datatype = FP64`, "takes FP32"}},
		{"wrong shape", func(r *pb.ModelInferRequest) { r.Inputs[1].Shape = []int64{4} },
			codes.InvalidArgument, []string{`input "b": shape = [4]`, "takes [2 2]"}},
		{"typed and raw", func(r *pb.ModelInferRequest) {
			r.Inputs[0].Contents = &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}
		}, codes.InvalidArgument, []string{`input "a": contents = typed and raw`}},
		{"raw for some", func(r *pb.ModelInferRequest) { r.RawInputContents = r.RawInputContents[:1] },
			codes.InvalidArgument, []string{"raw_input_contents = 1 entries", "all 2 inputs"}},
		{"missing input", func(r *pb.ModelInferRequest) {
			r.Inputs = r.Inputs[:1]
			r.RawInputContents = r.RawInputContents[:1]
		}, codes.InvalidArgument, []string{`input = "b"`, "missing"}},
		{"extra input", func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, in("c", "FP32", 1))
			r.RawInputContents = append(r.RawInputContents, make([]byte, 4))
		}, codes.InvalidArgument, []string{`input = "c"`, "no such input"}},
		{"duplicated input", func(r *pb.ModelInferRequest) {
			r.Inputs = append(r.Inputs, in("a", "FP32", 2))
			r.RawInputContents = append(r.RawInputContents, make([]byte, 8))
		}, codes.InvalidArgument, []string{`inputs[2].name = "a"`, "given twice"}},
		{"unknown output", func(r *pb.ModelInferRequest) {
			r.Outputs = []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "zz"}}
		}, codes.InvalidArgument, []string{`output = "zz"`, "no such output"}},
		{"typed count", func(r *pb.ModelInferRequest) {
			r.RawInputContents = nil
			r.Inputs[0].Contents = &pb.InferTensorContents{Fp32Contents: []float32{1}}
			r.Inputs[1].Contents = &pb.InferTensorContents{IntContents: []int32{1, 2, 3, 4}}
		}, codes.InvalidArgument, []string{`input "a": contents.fp32_contents = 1 values`, "2 elements"}},
		{"typed range", func(r *pb.ModelInferRequest) {
			r.RawInputContents = nil
			r.Inputs[0].Contents = &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}
			r.Inputs[1].Contents = &pb.InferTensorContents{IntContents: []int32{1, 2, 300, 4}}
		}, codes.InvalidArgument, []string{`input "b": contents.int_contents[2] = 300`, "out of range for INT8"}},
		{"tensor bytes", func(r *pb.ModelInferRequest) {
			r.Inputs[0].Shape = []int64{20000}
			r.RawInputContents[0] = make([]byte, 80000)
		}, codes.ResourceExhausted, []string{"raw contents entry 0", "80000 bytes", "65536"}},
		{"message limit", func(r *pb.ModelInferRequest) {
			r.Inputs[0].Shape = []int64{300000}
			r.RawInputContents[0] = make([]byte, 1200000)
		}, codes.ResourceExhausted, []string{"larger than max"}},
		{"unknown model", func(r *pb.ModelInferRequest) { r.ModelName = "nope" },
			codes.NotFound, []string{`model "nope"`}},
		{"unknown version", func(r *pb.ModelInferRequest) { r.ModelVersion = "9" },
			codes.NotFound, []string{`no version "9"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.edit(r)
			_, err := rc.ModelInfer(ctxT(t), r)
			wantStatus(t, err, tc.code, tc.parts...)
			t.Logf("%v: %v", tc.name, err)
			// The server serves on.
			resp, err := rc.ModelInfer(ctxT(t), good())
			if err != nil || len(resp.RawOutputContents) != 2 {
				t.Fatalf("after %s: %v", tc.name, err)
			}
		})
	}
}

// A client that hangs up mid-request (the deadline passes while the
// model runs, or while a large request is still being sent) leaves the
// server serving and nothing held.
func TestHangUp(t *testing.T) {
	started := make(chan struct{}, 1)
	slow := ModelFunc(ModelMetadata{Name: "slow", Inputs: []TensorMetadata{{Name: "x", Datatype: "UINT8", Shape: []int64{-1}}},
		Outputs: []TensorMetadata{{Name: "x", Datatype: "UINT8", Shape: []int64{-1}}}},
		func(ctx context.Context, req *Request) ([]Output, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
	_, addr := serve(t, Options{}, slow, echoModel("echo", TensorMetadata{Name: "x", Datatype: "UINT8", Shape: []int64{-1}}))
	c := dial(t, addr, ClientOptions{})
	x := newRaw(t, dlpack.Uint8, 8<<20)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := c.Infer(ctx, &InferRequest{Model: "slow", Inputs: []Input{{Name: "x", Tensor: x}}})
	if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "Canceled") {
		t.Fatalf("got %v", err)
	}
	// Cut off while sending: a deadline shorter than the send.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	if _, err := c.Infer(ctx2, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}}); err == nil {
		t.Log("the request beat its deadline")
	}
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	waitReleased(t, x, 3)
}

// waitReleased waits (collecting garbage: buffers gRPC dropped unfreed
// are released by their cleanups) until r was released n times.
func waitReleased(t testing.TB, r *testTensor, n int32) {
	t.Helper()
	if !releasedN(r, n) {
		t.Fatalf("released %d times, want %d", r.released.Load(), n)
	}
}

// A server that answers with broken responses: the client fails with a
// clear error and holds nothing.
type liar struct {
	pb.UnimplementedGRPCInferenceServiceServer
	resp *pb.ModelInferResponse
}

func (l *liar) ModelInfer(context.Context, *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	return l.resp, nil
}

func TestHostileResponses(t *testing.T) {
	l := &liar{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterGRPCInferenceServiceServer(g, l)
	go g.Serve(lis)
	defer g.Stop()
	c := dial(t, lis.Addr().String(), ClientOptions{MaxMessageBytes: 1 << 20})
	out := func(name, datatype string, shape ...int64) *pb.ModelInferResponse_InferOutputTensor {
		return &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: datatype, Shape: shape}
	}
	cases := []struct {
		name  string
		resp  *pb.ModelInferResponse
		is    error
		parts []string
	}{
		{"byte length", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "INT16", 3)}, RawOutputContents: [][]byte{make([]byte, 5)}},
			ErrInvalid, []string{`output "y": byte length = 5`, "needs 6 bytes"}},
		{"negative dim", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "INT16", -1)}, RawOutputContents: [][]byte{{}}},
			ErrShape, []string{`output "y"`, "shape[0] = -1"}},
		{"BYTES cut short", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "BYTES", 2)}, RawOutputContents: [][]byte{{3, 0, 0, 0, 'a', 'b', 'c', 9}}},
			ErrInvalid, []string{`output "y": element 1`}},
		{"unknown datatype", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "COMPLEX", 1)}, RawOutputContents: [][]byte{{0, 0, 0, 0}}},
			ErrDatatype, []string{`output "y"`, "datatype = COMPLEX"}},
		{"raw for some", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "INT8", 1), out("z", "INT8", 1)}, RawOutputContents: [][]byte{{1}}},
			ErrInvalid, []string{"raw_output_contents = 1 entries"}},
		{"duplicated", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "INT8", 1), out("y", "INT8", 1)}, RawOutputContents: [][]byte{{1}, {2}}},
			ErrInvalid, []string{`outputs[1].name = "y"`, "given twice"}},
	}
	for _, tc := range cases {
		l.resp = tc.resp
		_, err := c.Infer(ctxT(t), &InferRequest{Model: "m"})
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q lacks %q", tc.name, err, p)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// Over the client's limit.
	l.resp = &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "UINT8", 2<<20)}, RawOutputContents: [][]byte{make([]byte, 2<<20)}}
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "m"})
	wantStatus(t, err, codes.ResourceExhausted)
	// Typed contents are taken, decoded once.
	l.resp = &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{
		{Name: "y", Datatype: "INT16", Shape: []int64{3}, Contents: &pb.InferTensorContents{IntContents: []int32{-1, 2, -300}}}}}
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	y := resp.Output("y")
	if !y.IsCopied() || string(y.Bytes()) != "\xff\xff\x02\x00\xd4\xfe" {
		t.Fatalf("typed: %v %x", y.IsCopied(), y.Bytes())
	}
}

// The client refuses what it cannot send before anything goes out, and
// holds nothing: duplicated or empty input names, an element type the
// protocol has no datatype for, a parameter of another type, and a
// request over its message limit.
func TestHostileClientSide(t *testing.T) {
	_, addr := serve(t, Options{}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}))
	c := dial(t, addr, ClientOptions{MaxMessageBytes: 1 << 20})
	a := newRaw(t, dlpack.Float32, 4)
	cases := []struct {
		name  string
		req   *InferRequest
		is    error
		parts []string
	}{
		{"duplicated", &InferRequest{Model: "m", Inputs: []Input{{Name: "a", Tensor: a}, {Name: "a", Tensor: a}}}, ErrInvalid, []string{`input name = "a"`, "empty or given twice"}},
		{"empty name", &InferRequest{Model: "m", Inputs: []Input{{Name: "", Tensor: a}}}, ErrInvalid, []string{`input name = ""`}},
		{"complex", &InferRequest{Model: "m", Inputs: []Input{{Name: "a", Tensor: newRaw(t, dlpack.Complex64, 2)}}}, ErrDatatype, []string{`input "a"`, "dtype = complex64"}},
		{"parameter", &InferRequest{Model: "m", Parameters: Parameters{"k": []int{1}}, Inputs: []Input{{Name: "a", Tensor: a}}}, ErrInvalid, []string{`parameters["k"] = []int`}},
	}
	for _, tc := range cases {
		_, err := c.Infer(ctxT(t), tc.req)
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q lacks %q", tc.name, err, p)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
	big := newRaw(t, dlpack.Float32, 300000)
	_, err := c.Infer(ctxT(t), &InferRequest{Model: "m", Inputs: []Input{{Name: "a", Tensor: big}}})
	wantStatus(t, err, codes.ResourceExhausted)
	t.Logf("over the limit: %v", err)
	waitReleased(t, big, 1)
	// Taken once (the first "a" of the duplicated case), released once.
	waitReleased(t, a, 1)
}
