//go:build unix

package dlflight

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// BenchmarkFlightGetMapped: BenchmarkFlightGet/64MiB with the tensor in
// a mapped .npy file (tensorfile.OpenNPY): the values are copied into each
// message under the fault guard instead of handed to gRPC (the cost of
// surviving a file truncated by another process).
func BenchmarkFlightGetMapped(b *testing.B) {
	s, addr := serve(b, Options{MaxMessageBytes: benchMessage})
	c := dial(b, addr, ClientOptions{MaxMessageBytes: benchMessage})
	src := benchSource(b, 256*64)
	var buf bytes.Buffer
	if err := tensorfile.WriteNPY(&buf, src); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "t.npy")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := s.Register("m", f.Tensors()[0]); err != nil {
		b.Fatal(err)
	}
	defer s.Unregister("m")
	if t, err := c.Get(context.Background(), "m"); err == nil {
		t.Close()
	}
	b.Run("64MiB", func(b *testing.B) {
		b.SetBytes(int64(len(src.data)))
		for b.Loop() {
			t, err := c.Get(context.Background(), "m")
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
}
