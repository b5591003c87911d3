package dlflight

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// waitFor polls cond (the server finishes a cancelled call on its own
// goroutine) for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	// what every goroutine is doing, so that a failure here says what
	// still holds on
	var stacks strings.Builder
	pprof.Lookup("goroutine").WriteTo(&stacks, 1)
	t.Fatalf("still %s after 10 s; the goroutines:\n%s", what, stacks.String())
}

// TestDisconnect: a client that goes away in the middle of a DoGet or a
// DoPut leaves nothing held on either side.
func TestDisconnect(t *testing.T) {
	salloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	limit := batchOverhead + 64<<10
	s, addr := serve(t, Options{Allocator: salloc, MaxMessageBytes: limit})
	src := newRaw(t, dlpack.Float32, 4096, 64) // 1 MiB: 16 batches
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(dlgrpc.Codec())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := flight.NewFlightServiceClient(conn)
	calloc := memory.NewCheckedAllocator(memory.NewGoAllocator())

	// DoGet: read two messages, then hang up
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := raw.DoGet(ctx, &flight.Ticket{Ticket: []byte("big")})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 2; j++ {
			f := &inFrame{alloc: calloc}
			if err := stream.RecvMsg(f); err != nil {
				t.Fatal(err)
			}
			if f.body != nil {
				f.body.Release()
			}
		}
		cancel()
	}
	calloc.AssertSize(t, 0)

	// DoPut: send the schema and two batches of a split tensor, then hang up
	c := dial(t, addr, ClientOptions{MaxMessageBytes: limit})
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := raw.DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		l, _ := layoutOf(dlpack.Float32, []int64{4096, 64})
		err = send(func(m any) error {
			if sent == 3 {
				cancel()
				return context.Canceled
			}
			sent++
			return stream.SendMsg(m)
		}, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"partial"}}, l.wire("partial"), l, src.data, nil, false, limit)
		if err == nil {
			t.Fatal("the interrupted put succeeded")
		}
		cancel()
	}
	// every DoGet and DoPut handler has returned, releasing what it held
	waitFor(t, "holding received bodies", func() bool { return salloc.CurrentAlloc() == 0 })
	if len(s.Names()) != 1 {
		t.Fatalf("held: %v", s.Names())
	}
	// and the server serves
	got, err := c.Get(ctxT(t), "big")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	s.Unregister("big")
	// the cut-off DoGets' queued bytes that gRPC dropped without freeing
	// them hold the tensor until a garbage collection finds them
	waitFor(t, "the unregistered tensor held", func() bool {
		runtime.GC()
		return src.released.Load() == 1
	})
	time.Sleep(50 * time.Millisecond)
	if src.released.Load() != 1 {
		t.Fatalf("released %d times", src.released.Load())
	}
}

// TestLoad: 16 clients each Get and Put a fixed number of times on
// loopback; no errors, nothing held at the end, and the server's heap
// flat after warm-up (runtime.MemStats, no timing).
func TestLoad(t *testing.T) {
	const clients, rounds = 16, 40
	if testing.Short() {
		t.Skip("-short")
	}
	salloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	calloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: salloc, MaxTensors: clients + 1})
	src := newRaw(t, dlpack.Float32, 256, 256) // 256 KiB
	if err := s.Register("shared", src); err != nil {
		t.Fatal(err)
	}
	run := func(n int) (errs int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for k := 0; k < clients; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := Dial(addr, ClientOptions{Allocator: calloc})
				if err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
					return
				}
				defer c.Close()
				ctx := context.Background()
				for i := 0; i < n; i++ {
					got, err := c.Get(ctx, "shared")
					if err == nil {
						err = c.Put(ctx, fmt.Sprintf("client%d", k), got)
						got.Close()
					}
					if err != nil {
						mu.Lock()
						errs++
						t.Log(err)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		return errs
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	if errs := run(rounds / 4); errs != 0 { // warm-up
		t.Fatalf("%d errors in the warm-up", errs)
	}
	before := heap()
	if errs := run(rounds); errs != 0 {
		t.Fatalf("%d errors", errs)
	}
	after := heap()
	held := uint64(clients+1) * uint64(len(src.data))
	t.Logf("%d clients x %d get+put of 256 KiB: heap %d KiB after warm-up, %d KiB after (tensors held: %d KiB)",
		clients, rounds, before>>10, after>>10, held>>10)
	// what is held is the same before and after (the last put of each
	// client); anything growing per call would show as rounds x clients x
	// 256 KiB = 160 MiB.
	if after > before+8<<20 {
		t.Fatalf("the heap grew from %d to %d bytes", before, after)
	}
	calloc.AssertSize(t, 0)
	s.Shutdown()
	salloc.AssertSize(t, 0)
	if src.released.Load() != 1 {
		t.Fatalf("released %d", src.released.Load())
	}
}

// TestUnregisterDuringGet: a tensor unregistered while a DoGet sends it
// is released when that DoGet ends and gRPC has let go of its bytes (the
// bytes of a cancelled stream that gRPC drops without freeing them, at a
// garbage collection), not before, and exactly once.
func TestUnregisterDuringGet(t *testing.T) {
	limit := batchOverhead + 1<<20
	s, addr := serve(t, Options{MaxMessageBytes: limit})
	src := newRaw(t, dlpack.Float32, 16384, 1024) // 64 MiB in 1 MiB batches: more than gRPC's windows hold
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(dlgrpc.Codec()), grpc.MaxCallRecvMsgSize(limit)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := flight.NewFlightServiceClient(conn).DoGet(ctx, &flight.Ticket{Ticket: []byte("big")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the schema and one batch: the server is mid-stream
		f := &inFrame{alloc: memory.DefaultAllocator}
		if err := stream.RecvMsg(f); err != nil {
			t.Fatal(err)
		}
		if f.body != nil {
			f.body.Release()
		}
	}
	if !s.Unregister("big") {
		t.Fatal("not registered")
	}
	if n := src.released.Load(); n != 0 {
		t.Fatalf("released %d times while a DoGet sends it", n)
	}
	cancel()
	waitFor(t, "not released", func() bool {
		runtime.GC()
		return src.released.Load() == 1
	})
	time.Sleep(50 * time.Millisecond)
	if n := src.released.Load(); n != 1 {
		t.Fatalf("released %d times", n)
	}
}
