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
		x, err := dlonnx.CopyToValue(dlpack.NewArray([]float32{}, shape))
		require.NoError(t, err)
		return x
	}
	ct := cTensor(dt, shape, nil, data, 0)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	defer f.Close()
	x, err := dlonnx.ToValue(f)
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

// Every element type ONNX Runtime and DLPack share comes out of a Session
// as ONNX Runtime allocated it, adopted: float16, bfloat16 and both fp8
// types included, bit for bit what went in, the shape read from the value.
func TestAdoptEveryElementType(t *testing.T) {
	types := map[string]dlpack.DataType{
		"int8": dlpack.Int8, "int16": dlpack.Int16, "int32": dlpack.Int32, "int64": dlpack.Int64,
		"uint8": dlpack.Uint8, "uint16": dlpack.Uint16, "uint32": dlpack.Uint32, "uint64": dlpack.Uint64,
		"float16": dlpack.Float16, "bfloat16": dlpack.BFloat16, "float32": dlpack.Float32, "float64": dlpack.Float64,
		"bool": dlpack.Bool, "float8_e4m3fn": dlpack.Float8E4M3FN, "float8_e5m2": dlpack.Float8E5M2,
	}
	models(t)
	for name, dt := range types {
		t.Run(name, func(t *testing.T) {
			s := dlSession(t, "identity_"+name+".onnx")
			assert.Equal(t, dt, s.Inputs()[0].DType)
			assert.Equal(t, []string{"n"}, s.Inputs()[0].Dims)
			for _, n := range []int64{1, 11, 37} { // a new output shape each run
				data := make([]byte, n*int64(dt.Bits)/8)
				for i := range data {
					data[i] = byte(i*73 + 11)
					if dt == dlpack.Bool {
						data[i] &= 1
					}
				}
				x := inputTensor(t, dt, []int64{n}, data)
				outs, err := s.Run(x)
				require.NoError(t, err)
				x.Destroy()
				o := outs[0]
				assert.Equal(t, dt, o.DType())
				assert.Equal(t, []int64{n}, o.Shape())
				assert.Equal(t, data, o.Bytes())
				g, err := dlpack.From(o)
				require.NoError(t, err)
				o.Destroy() // the consumer keeps ONNX Runtime's value
				assert.Equal(t, data, readBytes(t, g, dt))
				g.Close()
			}
		})
	}
	assert.Equal(t, 0, dlonnx.LibRefs())
}

// CheckInputs (and so Run) refuses inputs that do not match the model
// before ONNX Runtime is called, naming the input and the dimension.
func TestCheckInputs(t *testing.T) {
	batch := dlSession(t, "batch_float32.onnx") // X [batch, 8]
	add := dlSession(t, "add_float32.onnx")     // A, B [batch, n]
	f32 := func(shape ...int64) *dlonnx.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		x, err := dlonnx.ToValue(dlpack.NewArray(make([]float32, n), shape))
		require.NoError(t, err)
		t.Cleanup(func() { x.Destroy() })
		return x
	}
	i64, err := dlonnx.ToValue(dlpack.NewArray(make([]int64, 16), []int64{2, 8}))
	require.NoError(t, err)
	defer i64.Destroy()
	cases := []struct {
		name   string
		s      *dlonnx.Session
		inputs []*dlonnx.Tensor
		want   error
		input  string
		dim    int
		text   string
	}{
		{"dtype", batch, []*dlonnx.Tensor{i64}, dlpack.ErrDataType, "X", -1, `input "X": int64, the model wants float32`},
		{"rank", batch, []*dlonnx.Tensor{f32(16)}, dlpack.ErrNDim, "X", -1, `rank 1 [16], the model wants rank 2`},
		{"static dimension", batch, []*dlonnx.Tensor{f32(2, 7)}, dlpack.ErrShape, "X", 1, `input "X" dimension 1: 7, the model wants 8`},
		{"named dimensions differ", add, []*dlonnx.Tensor{f32(3, 4), f32(3, 5)}, dlpack.ErrShape, "B", 1,
			`input "B" dimension 1: 5, the model wants 4 (dimension "n" is 4 in input "A" dimension 1)`},
		{"count", add, []*dlonnx.Tensor{f32(3, 4)}, dlpack.ErrShape, "#1", -1, "1 inputs, the model wants 2 inputs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, err := range []error{c.s.CheckInputs(c.inputs...), func() error { _, err := c.s.Run(c.inputs...); return err }(),
				func() error { _, err := c.s.OutputShapes(c.inputs...); return err }()} {
				require.ErrorIs(t, err, dlonnx.ErrInput)
				require.ErrorIs(t, err, c.want)
				var ie *dlonnx.InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, c.input, ie.Input)
				assert.Equal(t, c.dim, ie.Dim)
				assert.Contains(t, err.Error(), c.text)
				assert.NotErrorIs(t, err, dlonnx.ErrRuntime, "refused before ONNX Runtime ran")
			}
		})
	}
	require.NoError(t, add.CheckInputs(f32(3, 4), f32(3, 4)))
	require.NoError(t, batch.CheckInputs(f32(5, 8)))
}

// OutputShapes sizes outputs for RunInto where the model fixes them from
// the inputs; the result equals Run's, which ONNX Runtime allocates.
func TestOutputShapesAndRunInto(t *testing.T) {
	s := dlSession(t, "batch_float32.onnx")
	assert.Equal(t, []string{"batch", ""}, s.Outputs()[0].Dims)
	assert.Equal(t, []int64{-1, 3}, s.Outputs()[0].Shape)
	for _, b := range []int64{1, 6, 40} {
		xs := make([]float32, 8*b)
		for i := range xs {
			xs[i] = float32(i%9) - 4
		}
		x, err := dlonnx.ToValue(dlpack.NewArray(xs, []int64{b, 8}))
		require.NoError(t, err)
		shapes, err := s.OutputShapes(x)
		require.NoError(t, err)
		require.Equal(t, [][]int64{{b, 3}}, shapes)
		y, err := dlonnx.NewOutput(dlpack.Float32, shapes[0])
		require.NoError(t, err)
		require.NoError(t, s.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}))
		outs, err := s.Run(x)
		require.NoError(t, err)
		assert.Equal(t, outs[0].Bytes(), y.GetData())
		outs[0].Destroy()
		y.Destroy()
		x.Destroy()
	}
	// ONNX Runtime checks the shape of an output it is given.
	x, err := dlonnx.ToValue(dlpack.NewArray(make([]float32, 16), []int64{2, 8}))
	require.NoError(t, err)
	defer x.Destroy()
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{3, 3})
	require.NoError(t, err)
	defer y.Destroy()
	assert.ErrorIs(t, s.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}), dlonnx.ErrRuntime)
}

// Sessions and FromValue refuse what they cannot take.
func TestSessionRefusals(t *testing.T) {
	models(t)
	_, err := dlonnx.NewSession([]byte("not a model"))
	assert.ErrorIs(t, err, dlonnx.ErrRuntime)
	_, err = dlonnx.FromValue(nil)
	assert.ErrorIs(t, err, dlpack.ErrNilPointer)
	s := dlSession(t, "relu_float32.onnx")
	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{1}, []int64{1}))
	require.NoError(t, err)
	x.Destroy()
	_, err = s.Run(x)
	assert.ErrorIs(t, err, dlpack.ErrClosed, "a destroyed input")
	s.Destroy()
	y, err := dlonnx.ToValue(dlpack.NewArray([]float32{1}, []int64{1}))
	require.NoError(t, err)
	defer y.Destroy()
	_, err = s.Run(y)
	assert.ErrorIs(t, err, dlpack.ErrClosed, "a destroyed session")
	assert.NoError(t, s.Destroy(), "idempotent")
}

// The fnuz float8 types, which ONNX Runtime has as outputs (Cast) though
// Go has no element type for them, are adopted with their DLPack type.
func TestAdoptFnuz(t *testing.T) {
	s := dlSession(t, "cast_fnuz.onnx")
	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{0, 1, 2, -1}, []int64{4}))
	require.NoError(t, err)
	defer x.Destroy()
	outs, err := s.Run(x)
	require.NoError(t, err)
	// 1 is 2^0: exponent bias 8 (e4m3fnuz) and 16 (e5m2fnuz).
	assert.Equal(t, dlpack.Float8E4M3FNUZ, outs[0].DType())
	assert.Equal(t, []byte{0x00, 0x40, 0x48, 0xc0}, outs[0].Bytes())
	assert.Equal(t, dlpack.Float8E5M2FNUZ, outs[1].DType())
	assert.Equal(t, []byte{0x00, 0x40, 0x44, 0xc0}, outs[1].Bytes())
	for _, o := range outs {
		assert.Equal(t, []int64{4}, o.Shape())
		m, err := dlpack.Produce(o, dlpack.Request{})
		require.NoError(t, err)
		o.Destroy()
		m.Close()
	}
}

// FromValue adopts an OrtValue made elsewhere (here over a C buffer): the
// shape and type are read from the value, the memory is shared, and the
// value is released once, by the last holder.
func TestFromValue(t *testing.T) {
	dlSession(t, "relu_float32.onnx") // keeps the library open
	buf, err := dlpack.NewBuffer[int32]([]int64{2, 3})
	require.NoError(t, err)
	defer buf.Close()
	for i := range buf.Data() {
		buf.Data()[i] = int32(i * 10)
	}
	base := dlonnx.LibRefs()
	v, err := dlonnx.NewValue(unsafe.Pointer(&buf.Data()[0]), 24, []int64{2, 3}, dlpack.Int32)
	require.NoError(t, err)
	o, err := dlonnx.FromValue(v)
	require.NoError(t, err)
	assert.Equal(t, base+1, dlonnx.LibRefs(), "the Output holds the library")
	assert.Equal(t, dlpack.Int32, o.DType())
	assert.Equal(t, []int64{2, 3}, o.Shape())
	f, err := dlpack.From(o)
	require.NoError(t, err)
	o.Destroy()
	xs, err := dlpack.Slice[int32](f)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 10, 20, 30, 40, 50}, xs)
	assert.Same(t, &buf.Data()[0], &xs[0], "no copy")
	assert.Equal(t, base+1, dlonnx.LibRefs(), "the consumer holds the value")
	f.Close()
	assert.Equal(t, base, dlonnx.LibRefs(), "released once, by the last holder")
	_, err = dlpack.From(o)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
}
