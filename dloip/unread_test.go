package dloip

import (
	"context"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// A client that sends ModelInfer requests one after another and reads
// no answer (its flow-control windows at gRPC's smallest) cannot make
// the server hold more unwritten answers than MaxConcurrentCalls ×
// MaxMessageBytes: the call that would pass it is answered
// codes.ResourceExhausted, naming the bound, though each call's place
// was given back when its model returned. Once the client reads, every
// answer is written and nothing is left held.
func TestUnreadAnswersBounded(t *testing.T) {
	const places, message = 2, 4 << 20 // 8 MiB of unwritten answers
	s, addr := serve(t, Options{MaxConcurrentCalls: places, MaxMessageBytes: message},
		echoModel("echo", TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}))
	raw, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(64<<10), grpc.WithStaticConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(dlgrpc.Codec()), grpc.MaxCallSendMsgSize(message), grpc.MaxCallRecvMsgSize(message)))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c := dial(t, addr, ClientOptions{MaxMessageBytes: message})
	x := newRaw(t, dlpack.Float32, 1<<20/4) // 1 MiB answers
	req := &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}}
	ctx := ctxT(t)
	const calls = 20
	var streams []grpc.ClientStream
	for range calls {
		msg, raws, mapped, held, err := c.message(req)
		if err != nil {
			t.Fatal(err)
		}
		h := c.conn.NewHold(func() { closeAll(held) })
		cs, err := raw.NewStream(ctx, &grpc.StreamDesc{}, methodInfer)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(newOutInfer(msg, fieldRawInput, raws, mapped, h)); err != nil {
			t.Fatal(err)
		}
		cs.CloseSend()
		h.Drop()
		streams = append(streams, cs)
		// one after another: the answer's headers (or the refusal) come
		// once the call has returned and given its place back
		if _, err := cs.Header(); err != nil {
			t.Fatal(err)
		}
	}
	limit := int64(places * message)
	if n := s.unsent.Load(); n == 0 || n > limit {
		t.Fatalf("%d bytes of answers unwritten, want some and at most %d", n, limit)
	}
	codesSeen := map[codes.Code]int{}
	for _, cs := range streams {
		in := newInInfer(new(pb.ModelInferResponse), fieldRawOutput, c.opts.Allocator, c.opts.MaxTensorBytes)
		err := cs.RecvMsg(in)
		in.freeRest()
		codesSeen[status.Code(err)]++
		if status.Code(err) == codes.ResourceExhausted && !strings.Contains(err.Error(), "MaxConcurrentCalls × MaxMessageBytes") {
			t.Fatalf("the refusal does not name its bound: %v", err)
		}
	}
	if codesSeen[codes.OK] < places || codesSeen[codes.ResourceExhausted] == 0 || codesSeen[codes.OK]+codesSeen[codes.ResourceExhausted] != calls {
		t.Fatalf("answers: %v", codesSeen)
	}
	for i := 0; (s.unsent.Load() != 0 || s.srv.Held() != 0) && i < 200; i++ {
		gcWait()
	}
	if s.unsent.Load() != 0 || s.srv.Held() != 0 {
		t.Fatalf("after the client read: %d bytes unwritten, %d buffers held", s.unsent.Load(), s.srv.Held())
	}
	resp, err := c.Infer(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
}
