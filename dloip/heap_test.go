package dloip

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"google.golang.org/grpc/status"
)

// hostileRounds is how many hostile messages each heap test sends.
const hostileRounds = 10000

// Heap bounds the hostile tests hold the process to: no one message
// makes it allocate more than perMessage (a hostile message declares
// up to 8 GiB; its own bytes are under 1 KiB), the heap never holds
// more than peakHeap of live and garbage objects together, and what is
// live after all of them is within kept of what was before.
const (
	perMessage = 4 << 20
	peakHeap   = 64 << 20
	kept       = 8 << 20
)

// heapRun sends n hostile messages with send (i is the round) and checks
// the bounds above. Under the race detector sync.Pool drops a quarter
// of what is put back, and gRPC's transport takes its write buffer (1
// MiB) from a pool for every write: a message then seems to allocate a
// write buffer per frame written, which is the detector's, not the
// message's. The bound per message is left out there; the peak and what
// is kept are checked.
func heapRun(t *testing.T, send func(i int) error) {
	var h dlgrpctest.Heap
	before := h.Live()
	var most, peak uint64
	for i := range hostileRounds {
		a := h.Allocated()
		if err := send(i); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		most = max(most, h.Allocated()-a)
		peak = max(peak, h.Objects())
	}
	after := h.Live()
	t.Logf("%d hostile messages: at most %d KiB allocated for one, heap peak %.1f MiB, live %.1f MiB before and %.1f MiB after",
		hostileRounds, most>>10, float64(peak)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
	if most > perMessage && !raceDetector || peak > peakHeap || after > before+kept {
		t.Fatalf("bounds: %d bytes for one message (at most %d), peak %d (at most %d), %d kept (at most %d)",
			most, perMessage, peak, peakHeap, int64(after)-int64(before), kept)
	}
}

// 10,000 hostile requests against a server with the zero Options: each
// gets its status, and the process stays within the heap bounds: no
// size a request only declares is ever allocated.
func TestHostileRequestsHeap(t *testing.T) {
	_, addr := serve(t, Options{Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}))
	conn := dlgrpctest.Dial(t, addr)
	cases := hostileRequests()
	ctx := ctxT(t)
	heapRun(t, func(i int) error {
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
	heapRun(t, func(i int) error {
		k := i % len(cases)
		next.Store(int32(k))
		_, err := c.Infer(ctx, &InferRequest{Model: "m"})
		if !errors.Is(err, cases[k].is) {
			return errors.Join(errors.New(cases[k].name), err)
		}
		return nil
	})
}
