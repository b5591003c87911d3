//go:build cgo

package dlonnx_test

import (
	"fmt"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	ort "github.com/yalue/onnxruntime_go"
)

var benchSizes = []struct {
	name string
	n    int64 // float32 elements
}{{"1MiB", 1 << 18}, {"64MiB", 1 << 24}}

// benchInput returns a C-memory float32 tensor of n elements (what a
// tensor from NumPy or PyTorch is), as an imported Foreign.
func benchInput(b *testing.B, n int64) dlpack.Foreign {
	buf, err := dlpack.NewBuffer[float32](n)
	if err != nil {
		b.Fatal(err)
	}
	for i, x := range buf.Data() {
		buf.Data()[i] = x + float32(i%7) - 3
	}
	f, err := dlpack.From(buf)
	buf.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// copyIn is the copying path: the tensor's elements copied into a Go
// slice for onnxruntime_go's NewTensor.
func copyIn(b *testing.B, f dlpack.Foreign) *ort.Tensor[float32] {
	xs, err := dlpack.ReadOnlySlice[float32](f)
	if err != nil {
		b.Fatal(err)
	}
	t, err := ort.NewTensor(ort.NewShape(f.Shape()...), append([]float32(nil), xs...))
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// Making the ONNX Runtime input tensor from a DLPack tensor and releasing
// it: the bridge shares (constant cost), the copying path copies.
func BenchmarkInput(b *testing.B) {
	models(b)
	for _, sz := range benchSizes {
		f := benchInput(b, sz.n)
		b.Run(fmt.Sprintf("bridge/%s", sz.name), func(b *testing.B) {
			for b.Loop() {
				t, err := dlonnx.ToValue(f)
				if err != nil {
					b.Fatal(err)
				}
				t.Destroy()
			}
		})
		b.Run(fmt.Sprintf("copy/%s", sz.name), func(b *testing.B) {
			for b.Loop() {
				copyIn(b, f).Destroy()
			}
		})
	}
}

// A whole inference of Relu, from a DLPack tensor to a DLPack tensor of
// the result. floor: ONNX Runtime's Run alone on tensors made beforehand;
// bridge: ToValue on the input, Run into an output made once, the
// output handed to a DLPack consumer (dlpack.From) and released; copy:
// onnxruntime_go's path, the input copied into Go memory and the output
// allocated by ONNX Runtime and copied into Go memory by onnxruntime_go.
func BenchmarkInference(b *testing.B) {
	s := session(b, "relu_float32.onnx", "X")
	for _, sz := range benchSizes {
		f := benchInput(b, sz.n)
		b.Run(fmt.Sprintf("floor/%s", sz.name), func(b *testing.B) {
			x, err := dlonnx.ToValue(f)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Destroy()
			y, err := dlonnx.NewOutput(dlpack.Float32, sz.n)
			if err != nil {
				b.Fatal(err)
			}
			defer y.Destroy()
			b.SetBytes(4 * sz.n)
			for b.Loop() {
				if err := s.Run([]ort.Value{x}, []ort.Value{y}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("bridge/%s", sz.name), func(b *testing.B) {
			y, err := dlonnx.NewOutput(dlpack.Float32, sz.n)
			if err != nil {
				b.Fatal(err)
			}
			defer y.Destroy()
			b.SetBytes(4 * sz.n)
			for b.Loop() {
				x, err := dlonnx.ToValue(f)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run([]ort.Value{x}, []ort.Value{y}); err != nil {
					b.Fatal(err)
				}
				x.Destroy()
				g, err := dlpack.From(y)
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
			}
		})
		b.Run(fmt.Sprintf("copy/%s", sz.name), func(b *testing.B) {
			b.SetBytes(4 * sz.n)
			for b.Loop() {
				x := copyIn(b, f)
				out := []ort.Value{nil}
				if err := s.Run([]ort.Value{x}, out); err != nil {
					b.Fatal(err)
				}
				x.Destroy()
				g, err := dlpack.From(dlpack.NewArray(out[0].(*ort.Tensor[float32]).GetData(), sz.n))
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
				out[0].Destroy()
			}
		})
	}
}
