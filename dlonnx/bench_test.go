//go:build cgo

package dlonnx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	buf, err := dlpack.NewBuffer[float32]([]int64{n})
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
			y, err := dlonnx.NewOutput(dlpack.Float32, []int64{sz.n})
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
			y, err := dlonnx.NewOutput(dlpack.Float32, []int64{sz.n})
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
				g, err := dlpack.From(dlpack.NewArray(out[0].(*ort.Tensor[float32]).GetData(), []int64{sz.n}))
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
				out[0].Destroy()
			}
		})
	}
}

// The sizes of the side-by-side benchmark with ONNX Runtime's Python API
// (bench/onnx_compare.sh): float32 elements of X for Y = X * X.
var freshSizes = []struct {
	name string
	n    int64
}{{"4KiB", 1 << 10}, {"64MiB", 1 << 24}}

// freshInputs returns four inputs of n, n-16, n-32 and n-48 elements in C
// memory, so that each run's output has a shape the previous did not.
func freshInputs(b *testing.B, n int64) []dlpack.Foreign {
	var fs []dlpack.Foreign
	for k := int64(0); k < 4; k++ {
		fs = append(fs, benchInput(b, n-16*k))
	}
	return fs
}

// An inference with a fresh output shape on every call, from a DLPack
// tensor to a DLPack consumer of the result: the input shared
// (ToValue), then
//   - run: Session.Run, the output left to ONNX Runtime (its arena) and
//     adopted (no copy, nothing zeroed);
//   - newoutput: NewOutput sized by OutputShapes, then RunInto (a new
//     zeroed C buffer per call, the way before Session);
//   - pool: a Pool's output sized by OutputShapes, then RunInto;
//   - ort: onnxruntime_go's own path, the output allocated by ONNX
//     Runtime and copied into Go memory by onnxruntime_go.
//
// bench/onnx_compare.sh runs ONNX Runtime's Python API (sess.run and
// IOBinding) on the same model and inputs beside it.
func BenchmarkFreshOutput(b *testing.B) {
	s := dlSession(b, "scale_float32.onnx")
	data, err := os.ReadFile(filepath.Join(models(b), "scale_float32.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	os_, err := ort.NewDynamicAdvancedSessionWithONNXData(data, []string{"X"}, []string{"Y"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer os_.Destroy()
	pool := dlonnx.NewPool()
	defer pool.Close()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	consume := func(p dlpack.Producer) {
		g, err := dlpack.From(p)
		must(err)
		g.Close()
	}
	// into runs the session into an output made by mk, sized by OutputShapes.
	into := func(f dlpack.Foreign, mk func(dlpack.DataType, []int64) (*dlonnx.Tensor, error)) {
		x, err := dlonnx.ToValue(f)
		must(err)
		shapes, err := s.OutputShapes(x)
		must(err)
		y, err := mk(dlpack.Float32, shapes[0])
		must(err)
		must(s.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}))
		x.Destroy()
		consume(y)
		y.Destroy()
	}
	variants := []struct {
		name string
		step func(f dlpack.Foreign)
	}{
		{"run", func(f dlpack.Foreign) {
			x, err := dlonnx.ToValue(f)
			must(err)
			outs, err := s.Run(x)
			must(err)
			x.Destroy()
			consume(outs[0])
			outs[0].Destroy()
		}},
		{"newoutput", func(f dlpack.Foreign) { into(f, dlonnx.NewOutput) }},
		{"pool", func(f dlpack.Foreign) { into(f, pool.Get) }},
		{"ort", func(f dlpack.Foreign) {
			x, err := dlonnx.ToValue(f)
			must(err)
			out := []ort.Value{nil}
			must(os_.Run([]ort.Value{x}, out))
			x.Destroy()
			consume(dlpack.NewArray(out[0].(*ort.Tensor[float32]).GetData(), out[0].GetShape()))
			out[0].Destroy()
		}},
	}
	for _, sz := range freshSizes {
		fs := freshInputs(b, sz.n)
		for _, v := range variants {
			b.Run(v.name+"/"+sz.name, func(b *testing.B) {
				// Warm-up: every shape at least once, and for 100 ms
				// (ONNX Runtime's thread pool, the arena, the Go heap).
				for i, start := 0, time.Now(); i < len(fs) || time.Since(start) < 100*time.Millisecond; i++ {
					v.step(fs[i%len(fs)])
				}
				b.SetBytes(4 * sz.n)
				i := 0
				for b.Loop() {
					v.step(fs[i%len(fs)])
					i++
				}
			})
		}
	}
}
