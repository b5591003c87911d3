package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/codes"
)

// TestTransportLimits: windows far beyond the message limits do not let a
// client send more than the server accepts.
func TestTransportLimits(t *testing.T) {
	huge := dlgrpc.Transport{WindowBytes: 1 << 30, ConnWindowBytes: 1 << 30}
	s, addr := serve(t, Options{MaxMessageBytes: 1 << 20, MaxTensorBytes: 3 << 20, Transport: huge})
	src := newRaw(t, dlpack.Float32, 1024, 1024) // 4 MiB
	one := dial(t, addr, ClientOptions{MaxMessageBytes: 64 << 20, Transport: huge})
	wantCode(t, one.Put(ctxT(t), "x", src), codes.ResourceExhausted) // one message of 4 MiB
	split := dial(t, addr, ClientOptions{MaxMessageBytes: 1 << 20, Transport: huge})
	wantCode(t, split.Put(ctxT(t), "x", src), codes.ResourceExhausted) // 4 MiB in one put
	if len(s.Names()) != 0 {
		t.Fatalf("held %v", s.Names())
	}
	small := newRaw(t, dlpack.Float32, 512, 1024) // 2 MiB, split in messages of 1 MiB
	if err := split.Put(ctxT(t), "y", small); err != nil {
		t.Fatal(err)
	}
	got, err := split.Get(ctxT(t), "y")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, small)
	got.Close()
}
