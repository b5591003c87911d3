package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
)

// TestTLSAndTokens: over TLS with certificates made here, a missing or
// unknown token is Unauthenticated, the policy's refusals are
// PermissionDenied, and what is allowed works.
func TestTLSAndTokens(t *testing.T) {
	stls, ctls := testPKI(t)
	allow := func(who string, op dlgrpc.Op, name string) bool {
		switch who {
		case "admin":
			return true
		case "reader":
			return op == dlgrpc.OpRead && name != "secret"
		}
		return false
	}
	s, addr := serve(t, Options{TLS: stls, Tokens: map[string]string{"tok-admin": "admin", "tok-reader": "reader"}, Allow: allow})
	for _, name := range []string{"public", "secret"} {
		if err := s.Register(name, newRaw(t, dlpack.Int16, 3, 3)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t)
	src := newRaw(t, dlpack.Float32, 8, 2)

	for _, tok := range []string{"", "tok-wrong"} {
		c := dial(t, addr, ClientOptions{TLS: ctls, Token: tok})
		_, err := c.Get(ctx, "public")
		wantCode(t, err, codes.Unauthenticated)
		_, err = c.List(ctx)
		wantCode(t, err, codes.Unauthenticated)
		_, err = c.Info(ctx, "public")
		wantCode(t, err, codes.Unauthenticated)
		wantCode(t, c.Put(ctx, "x", src), codes.Unauthenticated)
	}

	reader := dial(t, addr, ClientOptions{TLS: ctls, Token: "tok-reader"})
	got, err := reader.Get(ctx, "public")
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	_, err = reader.Get(ctx, "secret")
	wantCode(t, err, codes.PermissionDenied)
	_, err = reader.Info(ctx, "secret")
	wantCode(t, err, codes.PermissionDenied)
	wantCode(t, reader.Put(ctx, "x", src), codes.PermissionDenied)
	infos, err := reader.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "public" {
		t.Fatalf("reader lists %+v", infos)
	}

	admin := dial(t, addr, ClientOptions{TLS: ctls, Token: "tok-admin"})
	if err := admin.Put(ctx, "x", src); err != nil {
		t.Fatal(err)
	}
	back, err := admin.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, back, src)
	back.Close()

	// plaintext to a TLS server fails: no tensor crosses unencrypted
	plain := dial(t, addr, ClientOptions{Token: "tok-admin"})
	if _, err := plain.Get(ctx, "public"); err == nil {
		t.Fatal("a plaintext client was served by a TLS server")
	}
}

// TestLimits: tensors held, bytes per DoPut and the message size are
// ResourceExhausted, and the server goes on serving.
func TestLimits(t *testing.T) {
	limit := batchOverhead + 64<<10
	s, addr := serve(t, Options{MaxTensors: 2, MaxTensorBytes: 32 << 10, MaxMessageBytes: limit})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	small := newRaw(t, dlpack.Uint8, 16, 16)
	for _, name := range []string{"a", "b"} {
		if err := c.Put(ctx, name, small); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, c.Put(ctx, "c", small), codes.ResourceExhausted)
	if err := c.Put(ctx, "a", small); err != nil { // replacing is not holding more
		t.Fatal(err)
	}
	s.Unregister("b")
	big := newRaw(t, dlpack.Float32, 64, 256) // 64 KiB > MaxPutBytes, in 1 message
	wantCode(t, c.Put(ctx, "b", big), codes.ResourceExhausted)
	// a message beyond the server's limit, from a client that allows more
	wide := dial(t, addr, ClientOptions{MaxMessageBytes: 8 << 20})
	huge := newRaw(t, dlpack.Float32, 1, 1<<20)
	wantCode(t, wide.Put(ctx, "b", huge), codes.ResourceExhausted)
	if err := c.Put(ctx, "b", small); err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); len(got) != 2 {
		t.Fatal(got)
	}
}
