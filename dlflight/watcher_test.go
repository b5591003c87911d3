package dlflight

import (
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// watchers counts the goroutines of stall watches.
func watchers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "dlgrpc.(*Server).WatchStall.func")
}

// A DoGet its reader cuts off mid-stream, by cancelling the call or by
// closing its connection (a client that dies), ends there: its stall
// watch ends with its stream, and the tensor, unregistered meanwhile, is
// released then, long before StallTimeout and with no garbage collection
// by the program.
func TestCutOffDoGet(t *testing.T) {
	for _, closeConn := range []bool{false, true} {
		cutOff(t, closeConn)
	}
}

func cutOff(t *testing.T, closeConn bool) {
	// no collection but those the server runs itself
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	s, addr := serve(t, Options{MaxMessageBytes: 1 << 20}) // StallTimeout: a minute
	dialRaw := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStaticStreamWindowSize(64<<10), grpc.WithStaticConnWindowSize(64<<10),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(dlgrpc.Codec()), grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	conn := dialRaw()
	defer func() { conn.Close() }()
	const rounds = 20
	srcs := make([]*rawTensor, rounds)
	for i := range rounds {
		if closeConn {
			conn.Close()
			conn = dialRaw()
		}
		fc := flight.NewFlightServiceClient(conn)
		srcs[i] = newRaw(t, dlpack.Float32, 1024, 1024) // 4 MiB: 4 messages of 1 MiB
		if err := s.Register("big", srcs[i]); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := fc.DoGet(ctx, &flight.Ticket{Ticket: []byte("big")})
		if err != nil {
			t.Fatal(err)
		}
		f := &inFrame{alloc: dlgrpc.DefaultAllocator}
		if err := stream.RecvMsg(f); err != nil || f.err != nil {
			t.Fatal(err, f.err)
		}
		if f.body != nil {
			f.body.Release()
		}
		if closeConn {
			conn.Close()
		}
		cancel()
	}
	s.Unregister("big")
	start := time.Now()
	for {
		n := 0
		for _, src := range srcs {
			n += int(src.released.Load())
		}
		w := watchers()
		if n == rounds && w == 0 && s.srv.Held() == 0 {
			t.Logf("%d DoGets cut off (connection closed: %v): tensors released and watches ended %v after the last", rounds, closeConn, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after %v: %d of %d tensors released, %d stall watches running, %d buffers held by gRPC", time.Since(start), n, rounds, w, s.srv.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
