package dloip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// A Dynamic model sees every input the request carries, as it came
// (names, datatypes, shapes), and returns any outputs: asked for by
// name, or all when none are asked for. Its listed inputs are still
// checked; an optional one may be left out; a datatype left to the
// request ("") takes any.
func TestDynamicModel(t *testing.T) {
	var seen []string
	route := ModelFunc(ModelMetadata{Name: "route", Dynamic: true,
		Inputs: []TensorMetadata{
			{Name: "k", Datatype: "INT64", Shape: []int64{1}},
			{Name: "temp", Datatype: "FP32", Shape: []int64{}, Optional: true},
			{Name: "any", Datatype: "", Shape: []int64{-1}, Optional: true},
		},
		Outputs: []TensorMetadata{{Name: "n", Datatype: "INT64", Shape: []int64{1}}}},
		func(_ context.Context, req *Request) ([]Output, error) {
			seen = seen[:0]
			for _, in := range req.Inputs {
				seen = append(seen, fmt.Sprintf("%s:%s%v", in.Name(), in.Datatype(), in.Shape()))
			}
			outs := []Output{{Name: "n", Tensor: dlpack.NewArray([]int64{int64(len(req.Inputs))}, []int64{1})}}
			for _, in := range req.Inputs {
				outs = append(outs, Output{Name: "echo_" + in.Name(), Tensor: in})
			}
			return outs, nil
		})
	_, addr := serve(t, Options{}, route)
	c := dial(t, addr, ClientOptions{})
	k := Input{Name: "k", Tensor: dlpack.NewArray([]int64{7}, []int64{1})}
	// unlisted inputs of any datatype and shape, every output returned
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "route", Inputs: []Input{k,
		{Name: "ids", Tensor: dlpack.NewArray([]int32{1, 2, 3, 4, 5, 6}, []int64{2, 3})},
		{Name: "prompt", Tensor: Strings("hi", "there")},
		{Name: "any", Tensor: dlpack.NewArray([]uint8{9}, []int64{1})}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, " ") != "k:INT64[1] ids:INT32[2 3] prompt:BYTES[2] any:UINT8[1]" {
		t.Fatalf("the model saw %v", seen)
	}
	if len(resp.Outputs) != 5 || resp.Output("echo_prompt") == nil || string(resp.Output("echo_prompt").Elements()[1]) != "there" {
		t.Fatalf("outputs %d", len(resp.Outputs))
	}
	resp.Close()
	// an output asked for that the metadata does not list
	resp, err = c.Infer(ctxT(t), &InferRequest{Model: "route", Inputs: []Input{k}, Outputs: []RequestedOutput{{Name: "echo_k"}}})
	if err != nil || len(resp.Outputs) != 1 || resp.Outputs[0].Name() != "echo_k" {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Close()
	// listed inputs are checked; the one that is not optional is needed
	for _, tc := range []struct {
		in    []Input
		parts []string
	}{
		{[]Input{{Name: "ids", Tensor: dlpack.NewArray([]int32{1}, []int64{1})}}, []string{`input = "k"`, "missing"}},
		{[]Input{{Name: "k", Tensor: dlpack.NewArray([]int32{1}, []int64{1})}}, []string{`input "k": datatype = INT32`, "takes INT64"}},
		{[]Input{k, {Name: "temp", Tensor: dlpack.NewArray([]float32{1, 2}, []int64{2})}}, []string{`input "temp": shape = [2]`, "takes []"}},
	} {
		_, err := c.Infer(ctxT(t), &InferRequest{Model: "route", Inputs: tc.in})
		wantStatus(t, err, codes.InvalidArgument, tc.parts...)
	}
	// an output the model returns not: Internal; one asked for twice:
	// InvalidArgument
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "route", Inputs: []Input{k}, Outputs: []RequestedOutput{{Name: "nope"}}})
	wantStatus(t, err, codes.Internal, `no output "nope"`)
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "route", Inputs: []Input{k}, Outputs: []RequestedOutput{{Name: "n"}, {Name: "n"}}})
	wantStatus(t, err, codes.InvalidArgument, "asked for twice")

	// the metadata on the wire is what the protocol means: -1 for a
	// variable dimension, [] for a scalar, "" for a datatype left to the
	// request
	mm, err := c.ModelMetadata(ctxT(t), "route", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(mm.Inputs); got != "[{k INT64 [1] false} {temp FP32 [] false} {any  [-1] false}]" {
		t.Fatalf("metadata %s", got)
	}
}

// Register refuses metadata the protocol cannot say: a nil shape (the
// protocol has no "any rank"), a datatype it does not have.
func TestRegisterRefuses(t *testing.T) {
	s := NewServer(Options{})
	for _, tc := range []struct {
		meta ModelMetadata
		is   error
		part string
	}{
		{ModelMetadata{Name: "m", Inputs: []TensorMetadata{{Name: "x", Datatype: "FP32"}}}, ErrShape, "shape = nil"},
		{ModelMetadata{Name: "m", Outputs: []TensorMetadata{{Name: "y", Datatype: "FP8", Shape: []int64{1}}}}, ErrDatatype, "FP8"},
		{ModelMetadata{Name: "m", Inputs: []TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-2}}}}, ErrShape, "shape[0] = -2"},
		{ModelMetadata{Name: ""}, ErrInvalid, "needs a name"},
	} {
		err := s.Register(ModelFunc(tc.meta, echo))
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.part) {
			t.Fatalf("%+v: %v", tc.meta, err)
		}
	}
}

// BYTES both ways: a BytesTensor goes out in the raw layout, comes back
// as a Tensor whose Elements share the received memory, handed on as it
// came; typed contents (bytes_contents) are taken too; every length is
// checked against the message before anything is allocated for it.
func TestBytes(t *testing.T) {
	var got [][]byte
	m := ModelFunc(ModelMetadata{Name: "upper", Inputs: []TensorMetadata{{Name: "text", Datatype: BYTES, Shape: []int64{-1, -1}}},
		Outputs: []TensorMetadata{{Name: "text", Datatype: BYTES, Shape: []int64{-1, -1}}, {Name: "lens", Datatype: "INT32", Shape: []int64{-1}}}},
		func(_ context.Context, req *Request) ([]Output, error) {
			in := req.Input("text")
			got = nil
			var lens []int32
			up := &BytesTensor{Shape: in.Shape()}
			for _, e := range in.Elements() {
				got = append(got, append([]byte{}, e...))
				lens = append(lens, int32(len(e)))
				up.Elements = append(up.Elements, bytes.ToUpper(e))
			}
			if _, err := dlpack.From(in); !errors.Is(err, ErrDatatype) {
				return nil, fmt.Errorf("a BYTES tensor went through DLPack: %v", err)
			}
			return []Output{{Name: "text", Tensor: up}, {Name: "lens", Tensor: dlpack.NewArray(lens, []int64{int64(len(lens))})}}, nil
		})
	_, addr := serve(t, Options{}, m, dynamicEcho())
	c := dial(t, addr, ClientOptions{})
	text := [][]byte{[]byte("hello"), {}, []byte("h\u00e9llo \u4e16\u754c"), {0, 1, 0}}
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "upper", Inputs: []Input{{Name: "text", Tensor: &BytesTensor{Shape: []int64{2, 2}, Elements: text}}}})
	if err != nil {
		t.Fatal(err)
	}
	out := resp.Output("text")
	if out.Datatype() != BYTES || fmt.Sprint(out.Shape()) != "[2 2]" || len(out.Elements()) != 4 || string(out.Elements()[2]) != "H\u00c9LLO \u4e16\u754c" {
		t.Fatalf("output %s %v %q", out.Datatype(), out.Shape(), out.Elements())
	}
	for i := range text {
		if !bytes.Equal(got[i], text[i]) {
			t.Fatalf("element %d: %q", i, got[i])
		}
	}
	lens, err := dlpack.From(resp.Output("lens"))
	if err != nil {
		t.Fatal(err)
	}
	if ys, _ := dlpack.Slice[int32](lens); fmt.Sprint(ys) != "[5 0 13 3]" {
		t.Fatalf("lens %v", ys)
	}
	lens.Close()
	// the Elements share the received raw contents
	raw := out.Bytes()
	if len(raw) != 4*4+5+0+13+3 || &out.Elements()[0][0] != &raw[4] {
		t.Fatal("the elements are not views of the received bytes")
	}
	resp.Close()
	// handed on as it came, zero elements too
	for _, shape := range [][]int64{{0}, {3}, {1, 0}} {
		n := int(shape[0])
		if len(shape) > 1 {
			n *= int(shape[1])
		}
		bt := &BytesTensor{Shape: shape, Elements: text[:n]}
		resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "s", Tensor: bt}}})
		if err != nil {
			t.Fatal(err)
		}
		if o := resp.Output("s"); fmt.Sprint(o.Shape()) != fmt.Sprint(shape) || fmt.Sprint(o.Elements()) != fmt.Sprint(bt.Elements) {
			t.Fatalf("%v: %v %q", shape, o.Shape(), o.Elements())
		}
		resp.Close()
	}
	// the client refuses a BytesTensor whose elements are not its shape's
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "s", Tensor: &BytesTensor{Shape: []int64{3}, Elements: text[:2]}}}})
	if !errors.Is(err, ErrShape) {
		t.Fatalf("elements and shape disagree: %v", err)
	}

	// typed contents, and lies, from a raw client
	rc := rawClient(t, addr)
	r, err := rc.ModelInfer(ctxT(t), &pb.ModelInferRequest{ModelName: "echo", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "s", Datatype: BYTES, Shape: []int64{2}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), []byte("bc")}}}}})
	if err != nil || len(r.RawOutputContents) != 1 || !bytes.Equal(r.RawOutputContents[0], []byte{1, 0, 0, 0, 'a', 2, 0, 0, 0, 'b', 'c'}) {
		t.Fatalf("typed: %v %x", err, r.GetRawOutputContents())
	}
	for _, tc := range []struct {
		name  string
		in    *pb.ModelInferRequest_InferInputTensor
		raw   []byte
		parts []string
	}{
		{"a length past the end", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1}}, []byte{9, 0, 0, 0, 'a'}, []string{"element 0: length = 9", "1 bytes are left"}},
		{"bytes left over", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1}}, []byte{1, 0, 0, 0, 'a', 'b'}, []string{"take 5"}},
		{"a count past the bytes", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1 << 28}}, []byte{0, 0, 0, 0}, []string{"268435456 elements, each a 4-byte length at least"}},
		{"a count past the limit", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1 << 31}}, nil, []string{"MaxTensorBytes"}},
		{"typed count", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1 << 28}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{{1}}}}, nil, []string{"bytes_contents = 1 values", "268435456 elements"}},
		{"numbers for BYTES", &pb.ModelInferRequest_InferInputTensor{Name: "s", Datatype: BYTES, Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{1}}}, nil, []string{"bytes_contents"}},
	} {
		req := &pb.ModelInferRequest{ModelName: "echo", Inputs: []*pb.ModelInferRequest_InferInputTensor{tc.in}}
		if tc.raw != nil {
			req.RawInputContents = [][]byte{tc.raw}
		}
		_, err := rc.ModelInfer(ctxT(t), proto.Clone(req).(*pb.ModelInferRequest))
		code := codes.InvalidArgument
		if strings.Contains(tc.name, "limit") {
			code = codes.ResourceExhausted
		}
		wantStatus(t, err, code, tc.parts...)
		t.Logf("%s: %v", tc.name, err)
	}
}
