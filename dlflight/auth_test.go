package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// The authorization scheme is case-insensitive (RFC 9110 11.1): a client
// that writes "bearer" or "BEARER" is authenticated as with "Bearer"; a
// scheme that is not Bearer, or a Bearer with no token, is not.
func TestBearerScheme(t *testing.T) {
	s, addr := serve(t, Options{Tokens: map[string]string{"tok": "someone"}})
	if err := s.Register("x", newRaw(t, dlpack.Int8, 2)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr, ClientOptions{})
	for _, h := range []string{"Bearer tok", "bearer tok", "BEARER tok"} {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "authorization", h)
		got, err := c.Get(ctx, "x")
		if err != nil {
			t.Fatalf("%q: %v", h, err)
		}
		got.Close()
	}
	for _, h := range []string{"Basic tok", "Bearer ", "Bearertok", "tok"} {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "authorization", h)
		_, err := c.Get(ctx, "x")
		wantCode(t, err, codes.Unauthenticated)
	}
}
