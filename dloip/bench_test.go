package dloip

import (
	"context"
	"testing"

	"github.com/godlpack/dlpack"
)

// BenchmarkInfer: one FP32 tensor to a Go echo model and back over
// loopback, Go client to Go server.
func BenchmarkInfer(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int64
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			_, addr := serve(b, Options{MaxMessageBytes: 256 << 20}, echoModel("echo", TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}))
			c := dial(b, addr, ClientOptions{MaxMessageBytes: 256 << 20})
			x := newRaw(b, dlpack.Float32, size.n/4)
			req := &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}}
			b.SetBytes(2 * size.n)
			b.ResetTimer()
			for range b.N {
				resp, err := c.Infer(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Close()
			}
		})
	}
}
