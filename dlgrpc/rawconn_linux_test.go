package dlgrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/emptypb"
)

// readyReader is the method gRPC's transport reads a connection with
// when the connection offers it (its internal readyreader.Reader).
type readyReader interface {
	ReadOnReady(bufSize int, pool mem.BufferPool) (*[]byte, int, error)
}

// The server's and the client's connections offer gRPC their sockets to
// read when readable, as a bare *net.TCPConn does: each read gives the
// bytes sent, in a buffer of the pool, the client's counted; the peer's
// close reads as io.EOF. A TLS connection offers nothing (its socket
// holds ciphertext).
func TestReadOnReady(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	tl := trackingListener{lis, &conns{m: map[string]net.Conn{}}}
	peer, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := tl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var received atomic.Int64
	client, _, err := countingCreds{TransportCredentials: nil, n: &received}.wrap(peer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pool := mem.NewTieredBufferPool(64)
	for _, tc := range []struct {
		name     string
		from, to net.Conn
		counted  bool
	}{{"server", client, c, false}, {"client", c, client, true}} {
		rr, ok := tc.to.(readyReader)
		if !ok {
			t.Fatalf("%s: %T offers gRPC no ReadOnReady", tc.name, tc.to)
		}
		for _, msg := range []string{"hello", "a second message"} {
			if _, err := tc.from.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			got := ""
			for len(got) < len(msg) {
				buf, n, err := rr.ReadOnReady(64, pool)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				got += string((*buf)[:n])
				pool.Put(buf)
			}
			if got != msg {
				t.Fatalf("%s: read %q, want %q", tc.name, got, msg)
			}
		}
	}
	if want := int64(len("hello") + len("a second message")); received.Load() != want {
		t.Fatalf("the client counted %d bytes, want %d", received.Load(), want)
	}
	c.Close()
	if _, _, err := client.(readyReader).ReadOnReady(64, pool); !errors.Is(err, io.EOF) {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}
	if rawConn(tls.Client(peer, &tls.Config{})) != nil {
		t.Fatal("a TLS connection offered its socket")
	}
}

// gRPC itself reads both ends of a call through ReadOnReady: its
// transport asks a connection for that method by its shape, internal to
// grpc-go, and a release that changed it would fall back to a buffered
// reader (one copy more) without an error. This fails then.
func TestGRPCReadsOnReady(t *testing.T) {
	var mu sync.Mutex
	var made []*rawReader
	rawReaderMade = func(r *rawReader) {
		mu.Lock()
		made = append(made, r)
		mu.Unlock()
	}
	defer func() { rawReaderMade = nil }()
	_, addr, _, _ := sendsServer(t, ServerOptions{}, 1, false)
	c, err := Dial("test", addr, ClientOptions{}, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/dlgrpctest.Sends/Send")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(new(emptypb.Empty)); err != nil {
		t.Fatal(err)
	}
	var got sink
	if err := cs.RecvMsg(&got); err != nil || got.n < 1<<20 {
		t.Fatalf("received %d bytes: %v", got.n, err)
	}
	cs.CloseSend()
	mu.Lock()
	defer mu.Unlock()
	// the server's and the client's connections (and any other a
	// stray client of an earlier test made meanwhile)
	read := 0
	for _, r := range made {
		if r.reads.Load() > 0 {
			read++
		}
	}
	if len(made) < 2 || read < 2 {
		t.Fatalf("%d connections offered ReadOnReady, gRPC called it on %d, want both ends of the call", len(made), read)
	}
}
