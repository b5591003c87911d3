package dloip

import (
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// endsStream reports whether a hostile request breaks the protocol's
// wire format, which ends a stream; the others fail their request
// alone.
func endsStream(parts []string) bool { return slices.Contains(parts, "malformed") }

// streamAnswers parses a stream's responses, failing the test on one
// that does not parse.
func streamAnswers(t *testing.T, raw [][]byte) []*pb.ModelStreamInferResponse {
	t.Helper()
	out := make([]*pb.ModelStreamInferResponse, len(raw))
	for i, b := range raw {
		out[i] = new(pb.ModelStreamInferResponse)
		if err := proto.Unmarshal(b, out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Every hostile request of the unary tests, on a stream between two
// good ones, against a server with the zero Options: one that breaks
// the wire format ends the stream with its status (InvalidArgument),
// any other is answered with its error, naming the request, between
// the good ones' answers, and the stream goes on.
func TestHostileStreamRequestsZeroOptions(t *testing.T) {
	_, addr := serve(t, Options{Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}),
		echoModel("h", TensorMetadata{Name: "a", Datatype: "FP16", Shape: []int64{-1}}))
	conn := dlgrpctest.Dial(t, addr)
	good, _ := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Id: "good", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "FP32", 2)}, RawInputContents: [][]byte{make([]byte, 8)}})
	for _, tc := range hostileRequests() {
		raw, err := dlgrpctest.Stream(ctxT(t), conn, methodStreamInfer, good, tc.wire, good)
		answers := streamAnswers(t, raw)
		if endsStream(tc.parts) {
			wantStatus(t, err, tc.code, tc.parts...)
			if len(answers) > 1 || len(answers) == 1 && answers[0].GetErrorMessage() != "" {
				t.Fatalf("%s: %d answers before the stream ended", tc.name, len(answers))
			}
			t.Logf("%s: the stream ends: %v", tc.name, err)
			continue
		}
		if err != nil || len(answers) != 3 {
			t.Fatalf("%s: %d answers, %v", tc.name, len(answers), err)
		}
		for _, i := range []int{0, 2} {
			if a := answers[i]; a.GetErrorMessage() != "" || a.GetInferResponse().GetId() != "good" || len(a.GetInferResponse().GetRawOutputContents()) != 1 {
				t.Fatalf("%s: answer %d: %v", tc.name, i, a)
			}
		}
		msg := answers[1].GetErrorMessage()
		for _, p := range tc.parts {
			if !strings.Contains(msg, p) {
				t.Fatalf("%s: %q lacks %q", tc.name, msg, p)
			}
		}
		if !answers[1].GetInferResponse().GetParameters()[ParamFinal].GetBoolParam() {
			t.Fatalf("%s: the error answer is not final", tc.name)
		}
		t.Logf("%s: answered %q", tc.name, msg)
	}
}

// hostileStreamResponses are ModelStreamInfer answers, as bytes on the
// wire, that lie to a client: the unary tests' hostile responses
// wrapped as a stream wraps them, and the lies of a stream's own: a
// final flag that is not a bool, a wrapped response whose length runs
// beyond the message, raw contents whose length runs beyond the
// wrapped response, two wrapped responses (protobuf merges them) whose
// raw contents together outnumber their outputs, an error whose answer carries raw
// contents (dropped, the error returned). Each with the error Recv must
// wrap and words it must have.
func hostileStreamResponses() []struct {
	name  string
	wire  []byte
	is    error
	parts []string
} {
	tag := func(num protowire.Number) []byte { return protowire.AppendTag(nil, num, protowire.BytesType) }
	wrap := func(b []byte) []byte { return protowire.AppendBytes(tag(fieldStreamResponse), b) }
	var out []struct {
		name  string
		wire  []byte
		is    error
		parts []string
	}
	for _, h := range hostileResponses() {
		out = append(out, struct {
			name  string
			wire  []byte
			is    error
			parts []string
		}{"wrapped: " + h.name, wrap(h.wire), h.is, h.parts})
	}
	y := &pb.ModelInferResponse_InferOutputTensor{Name: "y", Datatype: "FP32", Shape: []int64{2}}
	marshal := func(m proto.Message) []byte { b, _ := proto.Marshal(m); return b }
	notBool := marshal(&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{Parameters: map[string]*pb.InferParameter{
		ParamFinal: {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "true"}}}}})
	first := marshal(&pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{y, {Name: "z", Datatype: "FP32", Shape: []int64{2}}}, RawOutputContents: [][]byte{make([]byte, 8)}})
	second := marshal(&pb.ModelInferResponse{RawOutputContents: [][]byte{make([]byte, 8), make([]byte, 8)}})
	errWithRaws := marshal(&pb.ModelStreamInferResponse{ErrorMessage: "it failed", InferResponse: &pb.ModelInferResponse{Id: "r",
		Outputs: []*pb.ModelInferResponse_InferOutputTensor{y}, RawOutputContents: [][]byte{make([]byte, 4<<10)}}})
	return append(out, []struct {
		name  string
		wire  []byte
		is    error
		parts []string
	}{
		{"final flag not a bool", notBool, ErrInvalid, []string{ParamFinal, "true"}},
		{"wrapped length beyond the message", append(tag(fieldStreamResponse), protowire.AppendVarint(nil, 1<<30)...), dlgrpc.ErrMalformed, []string{"1073741824 bytes"}},
		{"raw length beyond the wrapped response", append(wrap(append(tag(fieldRawOutput), 20, 1, 2)), make([]byte, 20)...), dlgrpc.ErrMalformed, []string{"20 bytes"}},
		{"two wrapped responses, raw contents of both one too many", append(wrap(first), wrap(second)...), ErrInvalid, []string{"raw_output_contents = 3 entries"}},
		{"an error with raw contents", errWithRaws, ErrResponse, []string{`request "r"`, "it failed"}},
	}...)
}

// A client with the zero ClientOptions fails every hostile answer on a
// stream with an error wrapping the sentinel that says why, allocates
// nothing of a size only declared, and holds nothing afterwards; an
// answer that breaks the protocol ends the stream, an error answer
// does not.
func TestHostileStreamServerZeroOptions(t *testing.T) {
	cases := hostileStreamResponses()
	var next atomic.Int32
	addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) {
		return [][]byte{cases[next.Load()].wire}, nil
	})
	alloc := &countingAllocator{}
	c := dial(t, addr, ClientOptions{Allocator: alloc})
	for i, tc := range cases {
		next.Store(int32(i))
		s, err := c.InferStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&InferRequest{Model: "m"}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q lacks %q", tc.name, err, p)
			}
		}
		_, again := s.Recv()
		if tc.is == ErrResponse {
			if !errors.Is(again, io.EOF) {
				t.Fatalf("%s: after an error answer the stream goes on to its end: %v", tc.name, again)
			}
		} else if again != err {
			t.Fatalf("%s: the stream did not end with the answer that broke the protocol: %v", tc.name, again)
		}
		s.Close()
		if n := alloc.out.Load(); n != 0 {
			t.Fatalf("%s: %d bytes of received bodies held", tc.name, n)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// and through Responses: yielded once, and the loop ends
	next.Store(int32(slices.IndexFunc(cases, func(c struct {
		name  string
		wire  []byte
		is    error
		parts []string
	}) bool {
		return c.is == ErrResponse
	})))
	n := 0
	for resp, err := range c.Responses(ctxT(t), &InferRequest{Model: "m"}) {
		if resp != nil || !errors.Is(err, ErrResponse) {
			t.Fatalf("Responses: %v %v", resp, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("Responses yielded %d times", n)
	}
}

// 10,000 hostile requests on streams against a server with the zero
// Options: those that fail their request alone on one stream, those
// that break the wire format each on a stream of its own; each gets
// its answer or status, within the heap bounds of the unary tests.
func TestHostileStreamRequestsHeap(t *testing.T) {
	_, addr := serve(t, Options{Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}))
	conn := dlgrpctest.Dial(t, addr)
	cases := hostileRequests()
	ctx := ctxT(t)
	long, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, methodStreamInfer)
	if err != nil {
		t.Fatal(err)
	}
	dlgrpctest.HeapRun(t, func(i int) error {
		tc := cases[i%len(cases)]
		if endsStream(tc.parts) {
			_, err := dlgrpctest.Stream(ctx, conn, methodStreamInfer, tc.wire)
			if st, _ := status.FromError(err); st.Code() != tc.code {
				return errors.Join(errors.New(tc.name), err)
			}
			return nil
		}
		if err := long.SendMsg(tc.wire); err != nil {
			return err
		}
		var b []byte
		if err := long.RecvMsg(&b); err != nil {
			return err
		}
		var a pb.ModelStreamInferResponse
		if err := proto.Unmarshal(b, &a); err != nil || a.GetErrorMessage() == "" {
			return errors.Join(errors.New(tc.name), errors.New("no error answer"), err)
		}
		return nil
	})
	long.CloseSend()
	if err := long.RecvMsg(new([]byte)); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

// 10,000 hostile answers on streams to a client with the zero
// ClientOptions: each fails its Recv with its sentinel, within the same
// heap bounds.
func TestHostileStreamResponsesHeap(t *testing.T) {
	cases := hostileStreamResponses()
	var next atomic.Int32
	addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) {
		return [][]byte{cases[next.Load()].wire}, nil
	})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	dlgrpctest.HeapRun(t, func(i int) error {
		k := i % len(cases)
		next.Store(int32(k))
		s, err := c.InferStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Send(&InferRequest{Model: "m"}); err != nil {
			return err
		}
		if _, err := s.Recv(); !errors.Is(err, cases[k].is) {
			return errors.Join(errors.New(cases[k].name), err)
		}
		return nil
	})
}

// A stream's request is bounded as a ModelInfer's is: a request beyond
// MaxMessageBytes ends the stream with ResourceExhausted before the
// server buffers it, and a client refuses to send one beyond its own
// limit without ending its stream.
func TestStreamMessageLimits(t *testing.T) {
	_, addr := serve(t, Options{MaxMessageBytes: 1 << 20}, echoModel("m", TensorMetadata{Name: "a", Datatype: "UINT8", Shape: []int64{-1}}))
	big, _ := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "UINT8", 2<<20)}, RawInputContents: [][]byte{make([]byte, 2<<20)}})
	_, err := dlgrpctest.Stream(ctxT(t), dlgrpctest.Dial(t, addr), methodStreamInfer, big)
	wantStatus(t, err, codes.ResourceExhausted)
	c := dial(t, addr, ClientOptions{MaxMessageBytes: 1 << 20})
	s, err := c.InferStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Send(&InferRequest{Model: "m", Inputs: []Input{{Name: "a", Tensor: newRaw(t, dlpack.Uint8, 2<<20)}}})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxMessageBytes") {
		t.Fatalf("a request beyond the client's limit: %v", err)
	}
	x := newRaw(t, dlpack.Uint8, 16)
	if err := s.Send(&InferRequest{Model: "m", Inputs: []Input{{Name: "a", Tensor: x}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil || string(resp.Output("a").Bytes()) != string(x.data) {
		t.Fatalf("after a refused request: %v", err)
	}
	resp.Close()
}
