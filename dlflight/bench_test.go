package dlflight

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// benchSizes are the float32 tensors of make compare's Flight rows.
var benchSizes = []struct {
	name string
	rows int64
}{{"1MiB", 256}, {"64MiB", 256 * 64}, {"256MiB", 256 * 256}} // rows of 1024 float32

// benchMessage lets a 256 MiB tensor travel as one message, as pyarrow
// sends a record batch whole.
const benchMessage = 512 << 20

// benchSources are the benchmarks' tensors, made once per process: with
// -count N the random bytes are not drawn again for every count.
var benchSources = map[int64]*rawTensor{}

func benchSource(b *testing.B, rows int64) *rawTensor {
	if src, ok := benchSources[rows]; ok {
		return src
	}
	src := newRaw(b, dlpack.Float32, rows, 1024)
	benchSources[rows] = src
	return src
}

// BenchmarkFlightGet: a Go client fetches a float32 tensor from a Go
// server over loopback (plaintext), one DoGet per op; bytes/s is the
// throughput, and best-MB/s that of the fastest op (make compare's row,
// as bench/flight.py reports pyarrow's best fetch).
func BenchmarkFlightGet(b *testing.B) {
	s, addr := serve(b, Options{MaxMessageBytes: benchMessage})
	c := dial(b, addr, ClientOptions{MaxMessageBytes: benchMessage})
	for _, sz := range benchSizes {
		src := benchSource(b, sz.rows)
		if err := s.Register(sz.name, src); err != nil {
			b.Fatal(err)
		}
		// warm: the connection, and gRPC's buffer pools for this size
		if t, err := c.Get(context.Background(), sz.name); err == nil {
			t.Close()
		}
		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(int64(len(src.data)))
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				t, err := c.Get(context.Background(), sz.name)
				if err != nil {
					b.Fatal(err)
				}
				t.Close()
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			mb := func(d time.Duration) float64 { return float64(len(src.data)) / d.Seconds() / 1e6 }
			b.ReportMetric(mb(times[0]), "best-MB/s")
			b.ReportMetric(mb(times[len(times)/2]), "median-MB/s")
		})
		s.Unregister(sz.name)
	}
}

// BenchmarkFlightPut: the same bytes the other way (DoPut).
func BenchmarkFlightPut(b *testing.B) {
	s, addr := serve(b, Options{MaxMessageBytes: benchMessage})
	c := dial(b, addr, ClientOptions{MaxMessageBytes: benchMessage})
	for _, sz := range benchSizes {
		src := benchSource(b, sz.rows)
		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(int64(len(src.data)))
			for b.Loop() {
				if err := c.Put(context.Background(), sz.name, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.Unregister(sz.name)
	}
}

// BenchmarkMemcpy is the physical floor of the same bytes: one copy.
func BenchmarkMemcpy(b *testing.B) {
	for _, sz := range benchSizes {
		n := int(sz.rows) * 1024 * 4
		src, dst := dlpack.AlignedSlice[byte](n), dlpack.AlignedSlice[byte](n)
		for i := range src {
			src[i] = byte(i)
		}
		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}
