package dlflight

import (
	"errors"
	"net"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc"
)

// endless is a Flight server whose DoGet sends a schema without the
// tensor's shape, then the same batch again and again until the client
// goes away (or 1024 batches, 256 MiB: far more than the test's limit and
// than gRPC's flow-control windows and socket buffers can take in flight).
type endless struct {
	flight.BaseFlightServer
	frames []*flight.FlightData // the schema, then the batch
	sent   chan int
}

func (e *endless) DoGet(_ *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	n := 0
	defer func() { e.sent <- n }()
	if err := stream.Send(e.frames[0]); err != nil {
		return err
	}
	for ; n < 1024; n++ {
		if err := stream.Send(e.frames[1]); err != nil {
			return err
		}
	}
	return nil
}

// TestGetByteLimit: a server that streams rows without end (no shape in
// the schema to stop at) is cut off at ClientOptions.MaxGetBytes with an
// error wrapping ErrLimit, everything received released.
func TestGetByteLimit(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// 256 rows of 256 float32 values: 256 KiB a batch, no dlflight:shape
	srv := &endless{frames: encode(t, fslRecord(256, floats(256*256), ext("[256]"), nil)), sent: make(chan int, 1)}
	gs := grpc.NewServer()
	flight.RegisterFlightServiceServer(gs, srv)
	go gs.Serve(lis)
	defer gs.Stop()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	const limit = 4 << 20
	c := dial(t, lis.Addr().String(), ClientOptions{Allocator: alloc, MaxTensorBytes: limit})
	tt, err := c.Get(ctxT(t), "x")
	if tt != nil {
		tt.Close()
	}
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("endless stream: %v, want ErrLimit", err)
	}
	t.Logf("%v", err)
	alloc.AssertSize(t, 0)
	if n := <-srv.sent; n >= 1024 {
		t.Fatalf("the client took all %d batches", n)
	}
	if dlgrpc.DefaultMaxTensorBytes < DefaultMaxMessageBytes {
		t.Fatalf("dlgrpc.DefaultMaxTensorBytes %d below a message", dlgrpc.DefaultMaxTensorBytes)
	}
}
