package dlflight

import (
	"context"
	"fmt"
	"slices"
	"syscall"
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
// server over loopback (plaintext), one DoGet per op (one endpoint:
// EndpointBytes -1); bytes/s is the throughput, and best-MB/s that of the
// fastest op (make compare's row, as bench/flight.py reports pyarrow's
// best fetch).
func BenchmarkFlightGet(b *testing.B) {
	s, addr := serve(b, Options{MaxMessageBytes: benchMessage, EndpointBytes: -1})
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

// BenchmarkFlightGetStreams: the 64 and 256 MiB tensors as 1, 2 and 4
// endpoints (EndpointBytes the tensor's size over the count), fetched on
// as many streams at once. Beside median-MB/s it reports cpu-s/GB, the
// process's CPU seconds (user and system; server and client are both in
// it) per GB moved, which projects the scaling on more cores.
func BenchmarkFlightGetStreams(b *testing.B) {
	for _, sz := range benchSizes[1:] {
		src := benchSource(b, sz.rows)
		for _, streams := range []int{1, 2, 4} {
			s, addr := serve(b, Options{MaxMessageBytes: benchMessage, EndpointBytes: int64(len(src.data)) / int64(streams)})
			c := dial(b, addr, ClientOptions{MaxMessageBytes: benchMessage, Streams: streams})
			if err := s.Register(sz.name, src); err != nil {
				b.Fatal(err)
			}
			if t, err := c.Get(context.Background(), sz.name); err == nil {
				t.Close()
			}
			b.Run(fmt.Sprintf("%s/streams=%d", sz.name, streams), func(b *testing.B) {
				b.SetBytes(int64(len(src.data)))
				var times []time.Duration
				cpu0 := cpuTime()
				for b.Loop() {
					start := time.Now()
					t, err := c.Get(context.Background(), sz.name)
					if err != nil {
						b.Fatal(err)
					}
					t.Close()
					times = append(times, time.Since(start))
				}
				cpu := cpuTime() - cpu0
				slices.Sort(times)
				b.ReportMetric(float64(len(src.data))/times[len(times)/2].Seconds()/1e6, "median-MB/s")
				b.ReportMetric(cpu.Seconds()/(float64(len(src.data))*float64(len(times))/1e9), "cpu-s/GB")
			})
			s.Unregister(sz.name)
			s.Shutdown()
			c.Close()
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
