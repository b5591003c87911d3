package dloip

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"google.golang.org/grpc/status"
)

// 10,000 hostile requests against a server with the zero Options: each
// gets its status, and the process stays within the heap bounds: no
// size a request only declares is ever allocated.
func TestHostileRequestsHeap(t *testing.T) {
	_, addr := serve(t, Options{Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}))
	conn := dlgrpctest.Dial(t, addr)
	cases := hostileRequests()
	ctx := ctxT(t)
	dlgrpctest.HeapRun(t, func(i int) error {
		tc := cases[i%len(cases)]
		_, err := dlgrpctest.Unary(ctx, conn, methodInfer, tc.wire)
		if st, _ := status.FromError(err); st.Code() != tc.code {
			return errors.Join(errors.New(tc.name), err)
		}
		return nil
	})
}

// 10,000 hostile responses to a client with the zero ClientOptions:
// each fails its Infer with its sentinel, within the same heap bounds.
func TestHostileResponsesHeap(t *testing.T) {
	cases := hostileResponses()
	var next atomic.Int32
	addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) {
		return [][]byte{cases[next.Load()].wire}, nil
	})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	dlgrpctest.HeapRun(t, func(i int) error {
		k := i % len(cases)
		next.Store(int32(k))
		_, err := c.Infer(ctx, &InferRequest{Model: "m"})
		if !errors.Is(err, cases[k].is) {
			return errors.Join(errors.New(cases[k].name), err)
		}
		return nil
	})
}
