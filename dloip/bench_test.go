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

// BenchmarkInferREST: BenchmarkInfer over the REST binding, the tensor
// as binary data both ways (binary) or as JSON values both ways (JSON),
// Go client to Go server.
func BenchmarkInferREST(b *testing.B) {
	for _, mode := range []string{"binary", "JSON"} {
		for _, size := range []struct {
			name string
			n    int64
		}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}} {
			b.Run(mode+"/"+size.name, func(b *testing.B) {
				_, base := serveREST(b, Options{MaxMessageBytes: 2 << 30}, echoModel("echo", TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}))
				c := dialREST(b, base, ClientOptions{MaxMessageBytes: 2 << 30})
				if mode == "JSON" {
					c = c.WithJSON()
				}
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
}
