//go:build cgo

package dlonnx_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dlSession opens a model of the test folder as a dlonnx Session.
func dlSession(t testing.TB, model string) *dlonnx.Session {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(models(t), model))
	require.NoError(t, err)
	s, err := dlonnx.NewSession(data)
	require.NoError(t, err)
	t.Cleanup(func() { s.Destroy() })
	return s
}

// A tensor of a case file: written by testdata/models.py, the inputs it
// gave ONNX Runtime's Python API and the outputs it got back.
type caseTensor struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	File  string  `json:"file"`
}

type pyCase struct {
	Model   string       `json:"model"`
	Inputs  []caseTensor `json:"inputs"`
	Outputs []caseTensor `json:"outputs"`
}

var numpyTypes = map[string]dlpack.DataType{
	"float32": dlpack.Float32, "float16": dlpack.Float16, "int64": dlpack.Int64, "bool": dlpack.Bool,
}

func (c caseTensor) load(t *testing.T, dir string) (dlpack.DataType, []byte) {
	dt, ok := numpyTypes[c.DType]
	require.True(t, ok, c.DType)
	data, err := os.ReadFile(filepath.Join(dir, c.File))
	require.NoError(t, err)
	return dt, data
}

// inputTensor makes an input Tensor over C memory holding data.
func inputTensor(t *testing.T, dt dlpack.DataType, shape []int64, data []byte) *dlonnx.Tensor {
	t.Helper()
	if len(data) == 0 {
		x, err := dlonnx.CopyTensor(dlpack.NewArray([]float32{}, shape...))
		require.NoError(t, err)
		return x
	}
	ct := cTensor(dt, shape, nil, data, 0)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	defer f.Close()
	x, err := dlonnx.NewTensor(f)
	require.NoError(t, err)
	return x
}

// Outputs whose shape only the data gives (NonZero, Compress on float16,
// TopK with k given at run time, Reshape to a shape given at run time) and
// a dynamic batch: the Go session's outputs, adopted from ONNX Runtime
// without a copy, equal bit for bit what ONNX Runtime's Python API gave
// for the same inputs, type and shape included; OutputShapes knows the
// shapes the model's shape information fixes and leaves -1 elsewhere.
func TestSideBySidePython(t *testing.T) {
	dir := models(t)
	raw, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	var cases []pyCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.GreaterOrEqual(t, len(cases), 17)
	sessions := map[string]*dlonnx.Session{}
	for i, c := range cases {
		s := sessions[c.Model]
		if s == nil {
			s = dlSession(t, c.Model)
			sessions[c.Model] = s
		}
		var inputs []*dlonnx.Tensor
		for j, in := range c.Inputs {
			require.Equal(t, s.Inputs()[j].Name, in.Name)
			dt, data := in.load(t, dir)
			inputs = append(inputs, inputTensor(t, dt, in.Shape, data))
		}
		shapes, err := s.OutputShapes(inputs...)
		require.NoError(t, err)
		outs, err := s.Run(inputs...)
		require.NoError(t, err, "case %d (%s)", i, c.Model)
		require.Len(t, outs, len(c.Outputs))
		for j, want := range c.Outputs {
			dt, data := want.load(t, dir)
			o := outs[j]
			assert.Equal(t, dt, o.DType(), "case %d %s output %s", i, c.Model, want.Name)
			assert.Equal(t, want.Shape, o.Shape(), "case %d %s output %s", i, c.Model, want.Name)
			f, err := dlpack.From(o)
			require.NoError(t, err)
			if len(data) == 0 {
				data = nil // bytes.Clone of nothing
			}
			assert.Equal(t, data, readBytes(t, f, dt), "case %d %s output %s: bit for bit with ORT's Python API", i, c.Model, want.Name)
			if len(data) > 0 {
				assert.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(o.Bytes()))), f.DataAddr(), "the consumer reads ONNX Runtime's own memory")
			}
			for d, n := range shapes[j] {
				if n >= 0 {
					assert.Equal(t, want.Shape[d], n, "case %d %s: OutputShapes dimension %d", i, c.Model, d)
				}
			}
			o.Destroy()
			f.Close() // the consumer lets go last: the value is released then
		}
		switch c.Model {
		case "batch_float32.onnx", "add_float32.onnx":
			assert.NotContains(t, slices.Concat(shapes...), int64(-1), "shapes fixed by the inputs")
		case "nonzero_float32.onnx", "compress_float16.onnx", "topk_float32.onnx", "reshape_float32.onnx":
			assert.Contains(t, slices.Concat(shapes...), int64(-1), "shapes only the data gives")
		}
		for _, x := range inputs {
			x.Destroy()
		}
	}
	for _, s := range sessions {
		s.Destroy()
	}
	assert.Equal(t, 0, dlonnx.LibRefs(), "every value, output and session released its hold on the library")
	assert.Equal(t, int64(0), dlpack.Outstanding())
}
