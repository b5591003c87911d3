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

// BenchmarkStream: one request answered by 1,000 responses of 16 bytes
// (a decoupled model's tokens), Go client to Go server over loopback,
// each response checked and closed; ns/response is the cost of one.
func BenchmarkStream(b *testing.B) {
	s, addr := serve(b, Options{})
	if err := s.RegisterStream(floodModel()); err != nil {
		b.Fatal(err)
	}
	c := dial(b, addr, ClientOptions{})
	req := &InferRequest{Model: "flood", Inputs: []Input{{Name: "n", Tensor: int32s(1000)}}}
	b.ResetTimer()
	for range b.N {
		if n := streamFlood(b, c, req); n != 1000 {
			b.Fatalf("%d responses", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/response")
}

// streamFlood runs req (the flood model's) through Responses, checking
// each response, and returns how many came.
func streamFlood(tb testing.TB, c *Client, req *InferRequest) int {
	n := 0
	for resp, err := range c.Responses(context.Background(), req) {
		if err != nil {
			tb.Fatal(err)
		}
		if y := resp.Output("y"); y == nil || len(y.Bytes()) != 16 || y.Bytes()[15] != 15 {
			tb.Fatal("a response differs")
		}
		resp.Close()
		n++
	}
	return n
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
