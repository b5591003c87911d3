package dlflight

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/internal/testpki"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestThreeServers: a tensor's rows on three servers on 127.0.0.1, one
// of which is killed while two Gets fetch from it. The Get whose
// endpoint has no other location fails with an error naming the
// endpoint, its rows and its location; the Get whose endpoint lists a
// replica fetches those rows again there and gets the tensor, bit for
// bit; nothing received is left allocated, and the servers release
// every tensor at Shutdown.
func TestThreeServers(t *testing.T) {
	const rows, cols = 1000, 1024 // float32: 4 KiB rows, 4000 KiB
	limit := 64<<10 + batchOverhead
	src := newRaw(t, dlpack.Float32, rows, cols)
	rb := int64(cols * 4)
	part := func(from, to int64) *rawTensor {
		r := newRaw(t, dlpack.Float32, to-from, cols)
		copy(r.data, src.data[from*rb:to*rb])
		return r
	}
	a, addrA := serve(t, Options{MaxMessageBytes: limit})
	b, addrB := serve(t, Options{MaxMessageBytes: limit})
	c, addrC := serve(t, Options{MaxMessageBytes: limit})
	locA, locB, locC := "grpc+tcp://"+addrA, "grpc+tcp://"+addrB, "grpc+tcp://"+addrC
	parts := map[*Server][]*rawTensor{}
	reg := func(s *Server, name string, from, to int64) {
		p := part(from, to)
		if err := s.Register(name, p); err != nil {
			t.Fatal(err)
		}
		parts[s] = append(parts[s], p)
	}
	reg(a, "w.0", 0, 10)
	reg(b, "w.1", 10, 20)
	reg(c, "w.2", 20, rows)
	reg(a, "w.2", 20, rows) // a replica of C's rows
	shape := []int64{rows, cols}
	if err := a.RegisterRemote("w", dlpack.Float32, shape, []RemoteRange{
		{0, 10, []string{locA}, []byte("w.0")},
		{10, 20, []string{locB}, []byte("w.1")},
		{20, rows, []string{locC, locA}, []byte("w.2")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterRemote("norep", dlpack.Float32, shape, []RemoteRange{
		{0, 10, []string{locA}, []byte("w.0")},
		{10, 20, []string{locB}, []byte("w.1")},
		{20, rows, []string{locC}, []byte("w.2")},
	}); err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// small windows keep C's stream from running far ahead of the reader
	cl := dial(t, addrA, ClientOptions{MaxMessageBytes: limit, Allocator: alloc, Streams: 3, TrustLocation: trustAll,
		Transport: dlgrpc.Transport{WindowBytes: 64 << 10, ConnWindowBytes: 64 << 10}})

	// a calm fetch first, for the figures
	start := time.Now()
	got, err := cl.Get(ctxT(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	t.Logf("3 servers, 3 endpoints, %d KiB: %v", len(src.data)>>10, time.Since(start).Round(time.Microsecond))

	// C dies once 12 bodies have arrived, with both Gets under way
	var bodies atomic.Int32
	killed := make(chan struct{})
	var once sync.Once
	recvHook = func([]byte) {
		if bodies.Add(1) == 12 {
			// on its own goroutine: this one is the client's reader
			once.Do(func() { go func() { c.Shutdown(); close(killed) }() })
		}
	}
	t.Cleanup(func() { recvHook = nil })
	var wg sync.WaitGroup
	var rep *Tensor
	var repErr, norepErr error
	var repTook time.Duration
	wg.Add(2)
	go func() {
		defer wg.Done()
		t0 := time.Now()
		rep, repErr = cl.Get(ctxT(t), "w")
		repTook = time.Since(t0)
	}()
	go func() {
		defer wg.Done()
		_, norepErr = cl.Get(ctxT(t), "norep")
	}()
	wg.Wait()
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("C was not killed during the fetches")
	}
	if repErr != nil {
		t.Fatalf("with a replica: %v", repErr)
	}
	sameTensor(t, rep, src)
	rep.Close()
	t.Logf("C killed mid-fetch: the replica's Get took %v", repTook.Round(time.Microsecond))
	if norepErr == nil {
		t.Fatal("the Get without a replica succeeded with C killed")
	}
	for _, want := range []string{`"norep"`, "endpoint 2 (rows 20 to 1000", locC} {
		if !strings.Contains(norepErr.Error(), want) {
			t.Fatalf("the error does not name %s: %v", want, norepErr)
		}
	}
	t.Logf("without a replica: %v", norepErr)
	alloc.AssertSize(t, 0)

	// after C is gone: the replica serves, the other fails at once
	start = time.Now()
	got, err = cl.Get(ctxT(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	t.Logf("C down, replica listed: %v", time.Since(start).Round(time.Microsecond))
	_, err = cl.Get(ctxT(t), "norep")
	if err == nil || !strings.Contains(err.Error(), "endpoint 2") {
		t.Fatalf("C down, no replica: %v", err)
	}
	alloc.AssertSize(t, 0)
	// C's tensors: released at its Shutdown, or (when gRPC still held
	// the bytes of the cut-off stream as Shutdown ended its collections)
	// at a collection soon after
	t0 := time.Now()
	waitFor(t, "C's tensors held", func() bool {
		for _, p := range parts[c] {
			if p.released.Load() != 1 {
				runtime.GC()
				return false
			}
		}
		return true
	})
	t.Logf("C's tensors released %v after the checks began", time.Since(t0).Round(time.Millisecond))
	// the remote tensor itself is refused as a stream of this server
	if _, err := cl.fetchWhole("w"); err == nil || !strings.Contains(err.Error(), "held by other servers") {
		t.Fatalf("DoGet of a remote tensor: %v", err)
	}
	a.Shutdown()
	b.Shutdown()
	for _, s := range []*Server{a, b} {
		for _, p := range parts[s] {
			if p.released.Load() != 1 {
				t.Fatalf("released %d times", p.released.Load())
			}
		}
	}
}

// RegisterRemote refuses ranges that do not cover the rows in order.
func TestRegisterRemoteRanges(t *testing.T) {
	s := NewServer(Options{})
	defer s.Shutdown()
	loc := []string{"grpc+tcp://127.0.0.1:1"}
	for _, rs := range [][]RemoteRange{
		{{0, 5, loc, nil}},                    // short
		{{0, 5, loc, nil}, {6, 10, loc, nil}}, // gap
		{{0, 6, loc, nil}, {5, 10, loc, nil}}, // overlap
		{{0, 10, nil, nil}},                   // no location
		{{0, 11, loc, nil}},                   // past the end
	} {
		if err := s.RegisterRemote("r", dlpack.Int8, []int64{10}, rs); !errors.Is(err, ErrShape) {
			t.Fatalf("%v: %v", rs, err)
		}
	}
	if err := s.RegisterRemote("r", dlpack.Int8, []int64{10}, []RemoteRange{{0, 4, loc, nil}, {4, 10, loc, nil}}); err != nil {
		t.Fatal(err)
	}
}

// An endpoint whose stream is not the rows the FlightInfo promised (a
// wrong element type, row shape or row count) fails the Get with
// ErrInvalid naming the endpoint; nothing received stays allocated.
func TestLyingEndpoints(t *testing.T) {
	b, addrB := serve(t, Options{})
	for name, p := range map[string]*rawTensor{
		"int8":  newRaw(t, dlpack.Int8, 10, 4),
		"wide":  newRaw(t, dlpack.Float32, 10, 5),
		"short": newRaw(t, dlpack.Float32, 5, 4),
		"long":  newRaw(t, dlpack.Float32, 11, 4),
	} {
		if err := b.Register(name, p); err != nil {
			t.Fatal(err)
		}
	}
	a, addrA := serve(t, Options{})
	loc := []string{"grpc+tcp://" + addrB}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c := dial(t, addrA, ClientOptions{Allocator: alloc, TrustLocation: trustAll})
	for _, ticket := range []string{"int8", "wide", "short", "long"} {
		if err := a.RegisterRemote("y", dlpack.Float32, []int64{10, 4}, []RemoteRange{{0, 10, loc, []byte(ticket)}}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Get(ctxT(t), "y")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "endpoint 0 (rows 0 to 10") {
			t.Fatalf("%s: %v, want ErrInvalid naming the endpoint", ticket, err)
		}
		t.Logf("%s: %v", ticket, err)
		alloc.AssertSize(t, 0)
	}
	// a location that is not a Flight URI
	if err := a.RegisterRemote("y", dlpack.Float32, []int64{10, 4}, []RemoteRange{{0, 10, []string{"http://" + addrB}, []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctxT(t), "y"); err == nil || !strings.Contains(err.Error(), `scheme "http"`) {
		t.Fatalf("http location: %v", err)
	}
	alloc.AssertSize(t, 0)
}

// Get follows a location with the client's own TLS configuration and
// token: a second server that requires both serves its rows; a location
// of the other kind (plaintext for a TLS client) is refused before
// anything is dialled.
func TestLocationsTLSAndToken(t *testing.T) {
	auth := testpki.NewCA(t, "dlflight mTLS")
	serverTLS := &tls.Config{Certificates: []tls.Certificate{auth.Issue(t, "server", true)}, MinVersion: tls.VersionTLS13}
	tokens := map[string]string{"tok": "reader"}
	a, addrA := serve(t, Options{TLS: serverTLS}) // only B asks for the token
	b, addrB := serve(t, Options{TLS: serverTLS, Tokens: tokens})
	src := newRaw(t, dlpack.Int32, 20, 3)
	lo, hi := newRaw(t, dlpack.Int32, 8, 3), newRaw(t, dlpack.Int32, 12, 3)
	copy(lo.data, src.data[:8*12])
	copy(hi.data, src.data[8*12:])
	if err := a.Register("lo", lo); err != nil {
		t.Fatal(err)
	}
	if err := b.Register("hi", hi); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterRemote("x", dlpack.Int32, []int64{20, 3}, []RemoteRange{
		{0, 8, []string{"grpc+tls://" + addrA}, []byte("lo")},
		{8, 20, []string{"grpc+tls://" + addrB}, []byte("hi")},
	}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addrA, ClientOptions{TLS: &tls.Config{RootCAs: auth.Pool, MinVersion: tls.VersionTLS13}, Token: "tok", TrustLocation: trustAll})
	got, err := c.Get(ctxT(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	// without the token, B refuses its rows
	bare := dial(t, addrA, ClientOptions{TLS: &tls.Config{RootCAs: auth.Pool, MinVersion: tls.VersionTLS13}, TrustLocation: trustAll})
	if _, err := bare.Get(ctxT(t), "x"); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "endpoint 1") {
		t.Fatalf("without a token: %v", err)
	}
	if err := a.RegisterRemote("y", dlpack.Int32, []int64{20, 3}, []RemoteRange{
		{0, 20, []string{"grpc+tcp://" + addrB}, []byte("hi")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctxT(t), "y"); err == nil || !strings.Contains(err.Error(), "plaintext location") {
		t.Fatalf("a plaintext location for a TLS client: %v", err)
	}
}

// Get sends the client's token only where it trusts: by default to the
// address the client was dialled with, host and port as written;
// another port of the same host (another service there) and the same
// server under another name are never dialled, and their endpoints fail
// with ErrLocation naming both addresses, unless
// ClientOptions.TrustLocation trusts them. A trusted replica after an
// untrusted one serves the rows.
func TestLocationsTrusted(t *testing.T) {
	var calls atomic.Int64
	auth := func(_ context.Context, req dlgrpc.AuthRequest) (string, error) {
		calls.Add(1)
		if req.Token != "tok" {
			return "", status.Error(codes.Unauthenticated, "bad token")
		}
		return "reader", nil
	}
	b, addrB := serve(t, Options{Authenticate: auth})
	src := newRaw(t, dlpack.Int32, 20, 3)
	if err := b.Register("hi", src); err != nil {
		t.Fatal(err)
	}
	_, portB, _ := net.SplitHostPort(addrB)
	other := "grpc+tcp://" + net.JoinHostPort("::ffff:127.0.0.1", portB) // 127.0.0.1, written otherwise
	a, addrA := serve(t, Options{Authenticate: auth})
	if err := a.Register("hi", src); err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c := dial(t, addrA, ClientOptions{Token: "tok", Allocator: alloc})
	for _, loc := range []string{"grpc+tcp://" + addrB, other} {
		if err := a.RegisterRemote("x", dlpack.Int32, []int64{20, 3}, []RemoteRange{{0, 20, []string{loc}, []byte("hi")}}); err != nil {
			t.Fatal(err)
		}
		calls.Store(0)
		_, err := c.Get(ctxT(t), "x")
		if !errors.Is(err, ErrLocation) || !strings.Contains(err.Error(), strings.TrimPrefix(loc, "grpc+tcp://")) || !strings.Contains(err.Error(), addrA) {
			t.Fatalf("an untrusted location %s: %v, want ErrLocation naming both addresses", loc, err)
		}
		if n := calls.Load(); n != 1 { // the FlightInfo of A
			t.Fatalf("%s: %d calls, the untrusted location among them", loc, n)
		}
		alloc.AssertSize(t, 0)
	}

	// TrustLocation trusts it: asked with the location's address, it
	// gets the rows, and the token with them.
	var asked []string
	trusting := dial(t, addrA, ClientOptions{Token: "tok", Allocator: alloc, TrustLocation: func(addr string, tls bool) bool {
		asked = append(asked, fmt.Sprint(addr, " ", tls))
		return true
	}})
	calls.Store(0)
	got, err := trusting.Get(ctxT(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	if want := net.JoinHostPort("::ffff:127.0.0.1", portB) + " false"; len(asked) != 1 || asked[0] != want || calls.Load() < 2 {
		t.Fatalf("TrustLocation asked %q, %d calls; want [%q] and a call to the location", asked, calls.Load(), want)
	}
	// A TrustLocation that refuses is final, even for the dialled
	// address.
	refusing := dial(t, addrA, ClientOptions{Token: "tok", TrustLocation: func(string, bool) bool { return false }})
	if err := a.RegisterRemote("y", dlpack.Int32, []int64{20, 3}, []RemoteRange{{0, 20, []string{"grpc+tcp://" + addrA}, []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := refusing.Get(ctxT(t), "y"); !errors.Is(err, ErrLocation) || !strings.Contains(err.Error(), "TrustLocation refused") {
		t.Fatalf("a refused location: %v, want ErrLocation", err)
	}

	// An untrusted replica first, the dialled address second: the second
	// serves the rows.
	if err := a.RegisterRemote("z", dlpack.Int32, []int64{20, 3}, []RemoteRange{{0, 20, []string{"grpc+tcp://" + addrB, "grpc+tcp://" + addrA}, []byte("hi")}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.Get(ctxT(t), "z")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	alloc.AssertSize(t, 0)
}

// trustAll trusts every location: the tests' servers are all on
// loopback, each at a port of its own.
func trustAll(string, bool) bool { return true }
