package dloip

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// The REST binding under the gRPC service's security: TLS, bearer
// tokens, the per-model policy, the request's headers as the model's
// metadata.
func TestRESTSecurity(t *testing.T) {
	p := newPKI(t)
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	var seen atomic.Value
	headers := ModelFunc(ModelMetadata{Name: "headers", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}},
		func(ctx context.Context, req *Request) ([]Output, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			seen.Store(fmt.Sprint(md.Get("x-tenant")))
			return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
		})
	_, base := serveREST(t, Options{TLS: p.server, Tokens: map[string]string{"s3cret": "alice", "other": "bob"},
		Allow: func(principal string, _ dlgrpc.Op, model string) bool {
			return principal == "alice" || model == "public"
		}},
		echoModel("private", x), echoModel("public", x), headers)
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Float32, 4)}}
	ctx := ctxT(t)
	// Plaintext against TLS fails, and TLS without the CA.
	plain := dialREST(t, strings.Replace(base, "https://", "http://", 1), ClientOptions{Token: "s3cret"})
	if _, err := plain.ServerLive(ctx); err == nil {
		t.Fatal("plaintext reached a TLS server")
	}
	if _, err := dialREST(t, base, ClientOptions{Token: "s3cret"}).ServerLive(ctx); err == nil {
		t.Fatal("a server no root vouches for was trusted")
	}
	if _, err := DialREST(strings.Replace(base, "https://", "http://", 1), ClientOptions{TLS: p.client}); err == nil {
		t.Fatal("TLS options for a plaintext URL")
	}
	none := dialREST(t, base, ClientOptions{TLS: p.client})
	_, err := none.ServerLive(ctx)
	wantStatus(t, err, codes.Unauthenticated, "no bearer token")
	if re, ok := err.(*RESTError); !ok || re.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%#v", err)
	}
	wrong := dialREST(t, base, ClientOptions{TLS: p.client, Token: "nope"})
	_, err = wrong.Infer(ctx, &InferRequest{Model: "public", Inputs: in})
	wantStatus(t, err, codes.Unauthenticated, "unknown bearer token")
	bob := dialREST(t, base, ClientOptions{TLS: p.client, Token: "other"})
	_, err = bob.Infer(ctx, &InferRequest{Model: "private", Inputs: in})
	wantStatus(t, err, codes.PermissionDenied, `"bob" may not infer "private"`)
	_, err = bob.ModelMetadata(ctx, "private", "")
	wantStatus(t, err, codes.PermissionDenied)
	if ok, err := bob.ModelReady(ctx, "private", ""); ok || err == nil {
		t.Fatal("bob sees private ready")
	}
	resp, err := bob.Infer(ctx, &InferRequest{Model: "public", Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	alice := dialREST(t, base, ClientOptions{TLS: p.client, Token: "s3cret", Headers: map[string]string{"x-tenant": "acme"}})
	for _, m := range []string{"private", "headers"} {
		resp, err := alice.Infer(ctx, &InferRequest{Model: m, Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		resp.Close()
	}
	if s, _ := seen.Load().(string); s != "[acme]" {
		t.Fatalf("header x-tenant: %q", s)
	}
}

// MaxConcurrentCalls bounds REST requests and gRPC calls together: one
// beyond it is refused at once (429 over REST, ResourceExhausted over
// gRPC) before anything of it is read, and every place is given back
// when its request ends. A model that panics fails its request alone
// with 500.
func TestRESTMaxConcurrentCallsAndPanics(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	block := ModelFunc(ModelMetadata{Name: "block", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(ctx context.Context, req *Request) ([]Output, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
	})
	panics := ModelFunc(ModelMetadata{Name: "panics", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(context.Context, *Request) ([]Output, error) {
		panic("the model panics")
	})
	s, base := serveREST(t, Options{MaxConcurrentCalls: 2, Logger: slog.New(slog.DiscardHandler)}, block, panics, echoModel("echo", x))
	c := dialREST(t, base, ClientOptions{})
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Float32, 4)}}
	_, err := c.Infer(ctxT(t), &InferRequest{Model: "panics", Inputs: in})
	wantStatus(t, err, codes.Internal, "the model panics")
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			r, err := c.Infer(context.Background(), &InferRequest{Model: "block", Inputs: in})
			if err == nil {
				r.Close()
			}
			errs <- err
		}()
	}
	<-started
	<-started
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
	wantStatus(t, err, codes.ResourceExhausted, "MaxConcurrentCalls")
	if re, ok := err.(*RESTError); !ok || re.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%#v", err)
	}
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(lis)
	_, err = dial(t, lis.Addr().String(), ClientOptions{}).Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
	wantStatus(t, err, codes.ResourceExhausted, "MaxConcurrentCalls")
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c.Infer(ctx, &InferRequest{Model: "echo", Inputs: in})
	}
	for range 10 {
		r, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}

// A body that stops coming ends its request after StallTimeout, and what
// was allocated for its binary data is freed; a client that does not
// read a large answer loses its connection after StallTimeout, and the
// model's outputs are released.
func TestRESTStall(t *testing.T) {
	alloc := &countingAllocator{}
	var released atomic.Int32
	big := ModelFunc(ModelMetadata{Name: "big", Inputs: []TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
		Outputs: []TensorMetadata{{Name: "y", Datatype: "UINT8", Shape: []int64{-1}}}}, func(context.Context, *Request) ([]Output, error) {
		return []Output{{Name: "y", Tensor: newRaw(t, dlpack.Uint8, 64<<20), Release: func() { released.Add(1) }}}, nil
	})
	_, base := serveREST(t, Options{StallTimeout: 300 * time.Millisecond, Allocator: alloc, Logger: slog.New(slog.DiscardHandler)}, big)
	addr := strings.TrimPrefix(base, "http://")
	json := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[262144],"parameters":{"binary_data_size":1048576}}]}`)
	wire := restWire("/v2/models/big/infer", map[string]string{HeaderInferenceContentLength: fmt.Sprint(len(json))}, append(json, make([]byte, 1000)...), len(json)+1<<20)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(wire)
	for i := 0; alloc.out.Load() == 0 && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	for alloc.out.Load() != 0 && time.Since(t0) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if n := alloc.out.Load(); n != 0 {
		t.Fatalf("%d bytes held after the body stalled", n)
	}
	t.Logf("a stalled body: its 1 MiB freed %v after", time.Since(t0).Round(time.Millisecond))
	// An answer of 64 MiB to a client that reads none of it.
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	conn2.(*net.TCPConn).SetReadBuffer(4096)
	conn2.Write(restWire("/v2/models/big/infer", nil, []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[0],"data":[]}],"parameters":{"binary_data_output":true}}`), -1))
	t0 = time.Now()
	for released.Load() == 0 && time.Since(t0) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if released.Load() != 1 {
		t.Fatal("the output of an answer no one reads was not released")
	}
	t.Logf("an answer not read: its output released %v after", time.Since(t0).Round(time.Millisecond))
}
