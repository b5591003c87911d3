package dlgrpc

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/emptypb"
)

// writerMessage sends what a Writer makes.
type writerMessage struct{ w *Writer }

func (m writerMessage) MarshalWire() (mem.BufferSlice, error) { return m.w.Marshal() }

// sink receives any message, counting its bytes.
type sink struct{ n int }

func (s *sink) UnmarshalWire(data mem.BufferSlice) error {
	s.n = data.Len()
	return nil
}

// sendsServer serves a stream that, for every message its peer sends,
// answers burst messages of 1 MiB, each sent from its own memory with a
// Hold of its own Within the call's, watched by WatchSends (or
// WatchStall, with stall set). released counts the messages' releases,
// ended the handlers that returned.
func sendsServer(t *testing.T, opts ServerOptions, burst int, stall bool) (s *Server, addr string, released, ended *atomic.Int32) {
	t.Helper()
	s = NewServer("test", opts, 4<<20, 0)
	released, ended = new(atomic.Int32), new(atomic.Int32)
	payload := make([]byte, 1<<20)
	handler := func(_ any, ss grpc.ServerStream) error {
		defer ended.Add(1)
		call := s.NewHold(nil)
		defer call.Drop()
		var stop func()
		if stall {
			stop = s.WatchStall(ss.Context(), call)
		} else {
			stop = s.WatchSends(ss.Context(), call)
		}
		defer stop()
		for {
			if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			for range burst {
				h := s.NewHold(func() { released.Add(1) })
				h.Within(call)
				w := NewWriter(h)
				w.Tensor(1, [][]byte{payload}, nil)
				done := call.Sending()
				err := ss.SendMsg(writerMessage{w})
				done()
				h.Drop()
				if err != nil {
					return err
				}
			}
		}
	}
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "dlgrpctest.Sends", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Send", Handler: handler, ServerStreams: true, ClientStreams: true}}}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return s, lis.Addr().String(), released, ended
}

func sendsStream(t *testing.T, addr string) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec()), grpc.MaxCallRecvMsgSize(4<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/dlgrpctest.Sends/Send")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// WatchSends counts only the time a call sends: a stream idle for many
// StallTimeouts between its peer's messages keeps its connection (where
// WatchStall, which counts all the time the handler runs, cuts it), and
// a peer that stops reading while the call sends to it is cut after
// StallTimeout, every message's memory released then.
func TestWatchSends(t *testing.T) {
	const stall = 200 * time.Millisecond
	for _, watchAll := range []bool{false, true} {
		_, addr, _, _ := sendsServer(t, ServerOptions{StallTimeout: stall}, 2, watchAll)
		cs := sendsStream(t, addr)
		time.Sleep(5 * stall)
		err := cs.SendMsg(&emptypb.Empty{})
		for i := 0; err == nil && i < 2; i++ {
			err = cs.RecvMsg(new(sink))
		}
		if watchAll {
			if err == nil {
				t.Fatal("WatchStall kept a stream idle for 5 StallTimeouts")
			}
			continue
		}
		if err != nil {
			t.Fatalf("after 5 StallTimeouts idle: %v", err)
		}
		cs.CloseSend()
		if err := cs.RecvMsg(new(sink)); !errors.Is(err, io.EOF) {
			t.Fatalf("the stream ends with %v", err)
		}
	}

	// A reader that stops reading: the handler's SendMsg blocks until
	// the watch closes the connection.
	const burst = 64
	s, addr, released, ended := sendsServer(t, ServerOptions{StallTimeout: stall}, burst, false)
	cs := sendsStream(t, addr)
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for ended.Load() == 0 || s.Held() != 0 {
		if time.Since(start) > 20*stall+10*time.Second {
			t.Fatalf("after %v the stalled stream still runs (%d ended, %d buffers held); the goroutines:\n%s", time.Since(start), ended.Load(), s.Held(), goroutines())
		}
		// the buffers gRPC dropped with the cut connection are found by
		// a collection
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	n := released.Load()
	if n == 0 || n >= burst {
		t.Fatalf("%d of %d messages sent and released: the reader took them all, or none was sent", n, burst)
	}
	t.Logf("cut %v after the reader stopped; %d messages of 1 MiB sent and released", time.Since(start).Round(time.Millisecond), n)

	// One message the reader does not read, and the handler back to
	// waiting for the next: gRPC holds the message's buffer (its Hold is
	// Within the call's), which counts as a send under way.
	_, addr, released, ended = sendsServer(t, ServerOptions{StallTimeout: stall, Transport: Transport{WindowBytes: 64 << 10}}, 1, false)
	cs = sendsStream(t, addr)
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for ended.Load() == 0 || released.Load() != 1 {
		if time.Since(start) > 20*stall+10*time.Second {
			t.Fatalf("after %v the stream whose message is not read still runs (%d ended, %d released); the goroutines:\n%s", time.Since(start), ended.Load(), released.Load(), goroutines())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("cut %v after the reader stopped, the handler waiting", time.Since(start).Round(time.Millisecond))
}

// TakePlace takes places among MaxConcurrentCalls until none is left,
// and each leave gives one back, once.
func TestTakePlace(t *testing.T) {
	s := NewServer("test", ServerOptions{MaxConcurrentCalls: 2}, 1<<20, 0)
	a, ok1 := s.TakePlace()
	b, ok2 := s.TakePlace()
	if _, ok := s.TakePlace(); !ok1 || !ok2 || ok {
		t.Fatalf("took %v %v, and a third: %v", ok1, ok2, ok)
	}
	a()
	a()
	c, ok := s.TakePlace()
	if !ok {
		t.Fatal("a place given back is not free")
	}
	if _, ok := s.TakePlace(); ok {
		t.Fatal("a second leave gave back a second place")
	}
	b()
	c()
	if len(s.calls) != 0 {
		t.Fatalf("%d places still taken", len(s.calls))
	}
}

// goroutines is every goroutine's stack: what a test that waits in vain
// prints, so that its failure says what still holds on.
func goroutines() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}
