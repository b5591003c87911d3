package flight

import (
	"context"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

func TestRoundTrip(t *testing.T) {
	x := dlpack.AlignedSlice[float32](300 * 7)
	for i := range x {
		x[i] = float32(i) * 0.25
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := RoundTrip(ctx, x, 300, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(x) {
		t.Fatalf("fetched %d values, want %d", len(got), len(x))
	}
	for i := range x {
		if got[i] != x[i] {
			t.Fatalf("x[%d]: fetched %v, want %v", i, got[i], x[i])
		}
	}
	if n := dlpack.Outstanding(); n != 0 {
		t.Fatalf("%d exports outstanding after the round trip", n)
	}
}
