package dloip

import (
	"context"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// TLS, bearer tokens, the per-model policy and arbitrary headers.
func TestSecurity(t *testing.T) {
	p := newPKI(t)
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	var seen string
	headers := ModelFunc(ModelMetadata{Name: "headers", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}},
		func(ctx context.Context, req *Request) ([]Output, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			seen = md.Get("x-tenant")[0]
			return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
		})
	_, addr := serve(t, Options{TLS: p.server, Tokens: map[string]string{"s3cret": "alice", "other": "bob"},
		Allow: func(principal string, _ dlgrpc.Op, model string) bool {
			return principal == "alice" || model == "public"
		}},
		echoModel("private", x), echoModel("public", x), headers)
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Float32, 4)}}
	// Plaintext against TLS fails.
	plain := dial(t, addr, ClientOptions{Token: "s3cret"})
	if _, err := plain.ServerLive(ctxT(t)); err == nil {
		t.Fatal("plaintext reached a TLS server")
	}
	none := dial(t, addr, ClientOptions{TLS: p.client})
	_, err := none.ServerLive(ctxT(t))
	wantStatus(t, err, codes.Unauthenticated, "no bearer token")
	wrong := dial(t, addr, ClientOptions{TLS: p.client, Token: "nope"})
	_, err = wrong.Infer(ctxT(t), &InferRequest{Model: "public", Inputs: in})
	wantStatus(t, err, codes.Unauthenticated, "unknown bearer token")
	bob := dial(t, addr, ClientOptions{TLS: p.client, Token: "other"})
	_, err = bob.Infer(ctxT(t), &InferRequest{Model: "private", Inputs: in})
	wantStatus(t, err, codes.PermissionDenied, `"bob" may not infer "private"`)
	_, err = bob.ModelMetadata(ctxT(t), "private", "")
	wantStatus(t, err, codes.PermissionDenied)
	if ok, err := bob.ModelReady(ctxT(t), "private", ""); ok || err == nil {
		t.Fatal("bob sees private ready")
	}
	resp, err := bob.Infer(ctxT(t), &InferRequest{Model: "public", Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	alice := dial(t, addr, ClientOptions{TLS: p.client, Token: "s3cret", Headers: map[string]string{"x-tenant": "acme"}})
	for _, m := range []string{"private", "headers"} {
		resp, err := alice.Infer(ctxT(t), &InferRequest{Model: m, Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		resp.Close()
	}
	if seen != "acme" {
		t.Fatalf("header x-tenant: %q", seen)
	}
}
