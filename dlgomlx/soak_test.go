//go:build cgo

package dlgomlx_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/internal/cshim"
)

// soakRounds is DLGOMLX_SOAK (make gomlx sets 100000), or 2000.
func soakRounds(t *testing.T) int {
	if s := os.Getenv("DLGOMLX_SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("DLGOMLX_SOAK=%q", s)
		}
		return n
	}
	return 2000
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Exchanges each way, with exact deleter counts and flat memory: a GoMLX
// tensor handed to a C-block consumer (versioned and legacy, through
// dlpack.Produce and the C deleter) and released, n times; a C producer's
// tensor taken into simplego and finalized, n times, each deleter run
// exactly once.
func TestSoak(t *testing.T) {
	n := soakRounds(t)
	b := newBackend(t)
	x, err := dlgomlx.ToTensor(dlpack.NewArray(make([]float32, 1024), []int64{32, 32}), b)
	if err != nil {
		t.Fatal(err)
	}
	defer x.MustFinalizeAll()
	warm := func(k int) {
		for i := range k {
			e, err := dlgomlx.FromTensor(x)
			if err != nil {
				t.Fatal(err)
			}
			req := dlpack.Request{}
			if i%2 == 1 {
				req = dlpack.Request{Legacy: true} // legacy: read-only data is copied for it
			}
			m, err := e.DLPack(req)
			if err != nil {
				t.Fatal(err)
			}
			m.Close()
		}
	}
	warm(100)
	h0 := heapInUse()
	before := dlgomlx.ReadStats()
	warm(n)
	out := dlgomlx.ReadStats()
	if dlpack.Outstanding() != 0 || dlgomlx.Exports(x) != 0 {
		t.Fatalf("outstanding %d, exports %d after %d releases", dlpack.Outstanding(), dlgomlx.Exports(x), n)
	}
	if out.Shared-before.Shared != int64(n) || out.Copies != before.Copies {
		t.Fatalf("out: %+v -> %+v", before, out)
	}
	h1 := heapInUse()

	src := make([]byte, 1024*4)
	for i := range n {
		ct := cTensor(dlpack.Float32, []int64{32, 32}, nil, src, 0)
		f, err := dlpack.Import(ct.Ptr)
		if err != nil {
			t.Fatal(err)
		}
		y, err := dlgomlx.ToTensor(f, b)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if d := ct.Deletes(); d != 1 {
			t.Fatalf("round %d: deleter ran %d times", i, d)
		}
		y.MustFinalizeAll()
	}
	in := dlgomlx.ReadStats()
	if in.Copies-out.Copies != int64(n) || cshim.Live() != 0 {
		t.Fatalf("in: %d copies for %d rounds, %d producer tensors live", in.Copies-out.Copies, n, cshim.Live())
	}
	h2 := heapInUse()
	t.Logf("%d exchanges each way: heap in use %d KiB, after out %d KiB, after in %d KiB; outstanding %d, producer tensors live %d",
		n, h0>>10, h1>>10, h2>>10, dlpack.Outstanding(), cshim.Live())
	const slack = 4 << 20
	if h1 > h0+slack || h2 > h0+slack {
		t.Fatalf("heap grew: %d -> %d -> %d bytes", h0, h1, h2)
	}
}
