//go:build cgo

package dlonnx_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ort "github.com/yalue/onnxruntime_go"
)

// models returns the folder of the test models, or skips the test when
// ONNX Runtime was not loaded (plain go test; make onnx runs them).
func models(t testing.TB) string {
	t.Helper()
	lib, dir := os.Getenv("ONNXRUNTIME_LIB"), os.Getenv("DLONNX_MODELS")
	switch {
	case lib == "" && dir == "":
		t.Skip("ONNXRUNTIME_LIB is not set (make onnx sets it and DLONNX_MODELS)")
	case lib == "":
		t.Fatal("DLONNX_MODELS is set but ONNXRUNTIME_LIB is empty: the onnxruntime wheel's library was not found")
	case dir == "":
		t.Fatal("ONNXRUNTIME_LIB is set but DLONNX_MODELS is not: run testdata/models.py into a folder and name it")
	}
	return dir
}

// session opens a model of the test folder with one output Y. It passes
// the model's bytes: onnxruntime_go v1.27.0 never frees the C copy of a
// path it opens (createOrtCharString), which -asan reports as a leak.
func session(t testing.TB, model string, inputs ...string) *ort.DynamicAdvancedSession {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(models(t), model))
	require.NoError(t, err)
	s, err := ort.NewDynamicAdvancedSessionWithONNXData(data, inputs, []string{"Y"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Destroy() })
	return s
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// cTensor makes a tensor in C memory (a C producer with a counted
// deleter) of the given type, shape and strides (nil: compact).
func cTensor(dt dlpack.DataType, shape, strides []int64, data []byte, flags uint64) cshim.Tensor {
	if strides == nil {
		strides = make([]int64, len(shape))
		n := int64(1)
		for i := len(shape) - 1; i >= 0; i-- {
			strides[i] = n
			n *= shape[i]
		}
	}
	return cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: int32(len(shape)), Code: uint8(dt.Code), Bits: dt.Bits, Lanes: 1,
		Shape: shape, Strides: strides, Data: data, Flags: flags})
}

// mlpInputs returns X [4, 8], W [8, 3] and B [3] with values of both signs.
func mlpInputs() (x, w, b []float32) {
	x, w, b = make([]float32, 32), make([]float32, 24), make([]float32, 3)
	for i := range x {
		x[i] = float32(i%7) - 2.5
	}
	for i := range w {
		w[i] = float32(i%5)*0.25 - 0.5
	}
	b[0], b[1], b[2] = 0.5, -1, 0.25
	return
}

// reference computes Relu(X @ W + B) in float64.
func reference(x, w, b []float32) []float64 {
	y := make([]float64, 12)
	for i := 0; i < 4; i++ {
		for j := 0; j < 3; j++ {
			s := float64(b[j])
			for k := 0; k < 8; k++ {
				s += float64(x[8*i+k]) * float64(w[3*k+j])
			}
			y[3*i+j] = math.Max(s, 0)
		}
	}
	return y
}

// The MLP on inputs of every origin (Go heap, C producer, C buffer), each
// shared with ONNX Runtime: the result matches ORT's own copying path
// (onnxruntime_go's NewTensor on copies) bit for bit and a float64
// reference closely, and reaches a DLPack consumer without a copy.
func TestMLPFloat32(t *testing.T) {
	s := session(t, "mlp_float32.onnx", "X", "W", "B")
	xs, ws, bs := mlpInputs()

	// X: Go memory, pinned while ONNX Runtime holds it.
	x, err := dlonnx.ToValue(dlpack.NewArray(xs, []int64{4, 8}))
	require.NoError(t, err)
	defer x.Destroy()
	// W: C memory from a C producer; its Foreign is closed at once.
	cw := cTensor(dlpack.Float32, []int64{8, 3}, nil, f32bytes(ws...), 0)
	fw, err := dlpack.Import(cw.Ptr)
	require.NoError(t, err)
	w, err := dlonnx.ToValue(fw)
	require.NoError(t, err)
	require.NoError(t, fw.Close())
	assert.Equal(t, int64(0), cw.Deletes(), "the Tensor keeps the producer's memory")
	defer w.Destroy()
	// B: a C buffer.
	buf, err := dlpack.NewBuffer[float32]([]int64{3})
	require.NoError(t, err)
	copy(buf.Data(), bs)
	b, err := dlonnx.ToValue(buf)
	require.NoError(t, err)
	buf.Close()
	defer b.Destroy()
	for _, in := range []*dlonnx.Tensor{x, w, b} {
		assert.False(t, in.Copied())
	}

	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{4, 3})
	require.NoError(t, err)
	defer y.Destroy()
	runtime.GC() // the Go input must not move or vanish: it is pinned
	require.NoError(t, s.Run([]ort.Value{x, w, b}, []ort.Value{y}))

	// ORT's copying path on the same values.
	cx, _ := ort.NewTensor(ort.NewShape(4, 8), append([]float32(nil), xs...))
	cwt, _ := ort.NewTensor(ort.NewShape(8, 3), append([]float32(nil), ws...))
	cb, _ := ort.NewTensor(ort.NewShape(3), append([]float32(nil), bs...))
	cy, _ := ort.NewEmptyTensor[float32](ort.NewShape(4, 3))
	defer func() { cx.Destroy(); cwt.Destroy(); cb.Destroy(); cy.Destroy() }()
	require.NoError(t, s.Run([]ort.Value{cx, cwt, cb}, []ort.Value{cy}))

	got, err := dlpack.From(y)
	require.NoError(t, err)
	defer got.Close()
	ys, err := dlpack.Slice[float32](got)
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 3}, got.Shape())
	assert.Equal(t, cy.GetData(), ys, "bit for bit with onnxruntime_go's copying path")
	ref := reference(xs, ws, bs)
	for i := range ys {
		assert.InDelta(t, ref[i], float64(ys[i]), 1e-5, "element %d", i)
	}
	assert.Equal(t, y.GetData(), unsafe.Slice((*byte)(unsafe.Pointer(&ys[0])), 48), "the consumer sees ORT's own output memory")
	assert.Equal(t, unsafe.Pointer(&y.GetData()[0]), unsafe.Pointer(&ys[0]))
}

// Every element type ONNX Runtime and DLPack share goes through an
// Identity model both ways bit for bit, from C memory into C memory.
func TestEveryElementType(t *testing.T) {
	types := map[string]dlpack.DataType{
		"int8": dlpack.Int8, "int16": dlpack.Int16, "int32": dlpack.Int32, "int64": dlpack.Int64,
		"uint8": dlpack.Uint8, "uint16": dlpack.Uint16, "uint32": dlpack.Uint32, "uint64": dlpack.Uint64,
		"float16": dlpack.Float16, "bfloat16": dlpack.BFloat16, "float32": dlpack.Float32, "float64": dlpack.Float64,
		"bool": dlpack.Bool, "float8_e4m3fn": dlpack.Float8E4M3FN, "float8_e5m2": dlpack.Float8E5M2,
	}
	models(t)
	for name, dt := range types {
		t.Run(name, func(t *testing.T) {
			s := session(t, "identity_"+name+".onnx", "X")
			const n = 37
			data := make([]byte, n*int(dt.Bits)/8)
			for i := range data {
				data[i] = byte(i*73 + 11)
				if dt == dlpack.Bool {
					data[i] &= 1
				}
			}
			ct := cTensor(dt, []int64{n}, nil, data, 0)
			f, err := dlpack.Import(ct.Ptr)
			require.NoError(t, err)
			x, err := dlonnx.ToValue(f)
			require.NoError(t, err)
			f.Close()
			ot, err := dlonnx.ElementType(dt)
			require.NoError(t, err)
			assert.Equal(t, ort.TensorElementDataType(x.DataType()), ot)
			y, err := dlonnx.NewOutput(dt, []int64{n})
			require.NoError(t, err)
			require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
			require.NoError(t, x.Close())
			assert.Equal(t, int64(1), ct.Deletes(), "the producer's deleter ran once, at Close")

			g, err := dlpack.From(y)
			require.NoError(t, err)
			y.Destroy() // the consumer keeps the memory
			assert.Equal(t, dt, g.DataType())
			assert.Equal(t, data, readBytes(t, g, dt))
			g.Close()
		})
	}
}

// readBytes returns the bytes of a compact CPU tensor of any type.
func readBytes(t *testing.T, f dlpack.Foreign, dt dlpack.DataType) []byte {
	t.Helper()
	switch dt.Bits {
	case 8:
		switch dt {
		case dlpack.Bool:
			xs, err := dlpack.ReadOnlySlice[bool](f)
			require.NoError(t, err)
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs))
		case dlpack.Int8:
			return asBytes[int8](t, f)
		case dlpack.Float8E4M3FN:
			return asBytes[minifloat.E4M3FN](t, f)
		case dlpack.Float8E5M2:
			return asBytes[minifloat.E5M2](t, f)
		}
		return asBytes[uint8](t, f)
	case 16:
		switch dt {
		case dlpack.Int16:
			return asBytes[int16](t, f)
		case dlpack.Float16:
			return asBytes[minifloat.Float16](t, f)
		case dlpack.BFloat16:
			return asBytes[minifloat.BFloat16](t, f)
		}
		return asBytes[uint16](t, f)
	case 32:
		switch dt {
		case dlpack.Int32:
			return asBytes[int32](t, f)
		case dlpack.Float32:
			return asBytes[float32](t, f)
		}
		return asBytes[uint32](t, f)
	}
	switch dt {
	case dlpack.Int64:
		return asBytes[int64](t, f)
	case dlpack.Float64:
		return asBytes[float64](t, f)
	}
	return asBytes[uint64](t, f)
}

func asBytes[T dlpack.Element](t *testing.T, f dlpack.Foreign) []byte {
	xs, err := dlpack.ReadOnlySlice[T](f)
	require.NoError(t, err)
	var z T
	return bytes.Clone(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), len(xs)*int(unsafe.Sizeof(z))))
}

// The input is shared, not copied: a write to the producer's memory
// between two runs changes the second result.
func TestInputIsShared(t *testing.T) {
	s := session(t, "relu_float32.onnx", "X")
	arr := dlpack.NewArray([]float32{-1, 2, -3, 4}, []int64{4})
	x, err := dlonnx.ToValue(arr)
	require.NoError(t, err)
	defer x.Destroy()
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{4})
	require.NoError(t, err)
	defer y.Destroy()
	require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
	assert.Equal(t, f32bytes(0, 2, 0, 4), y.GetData())
	assert.Equal(t, []float32{-1, 2, -3, 4}, arr.Data, "ONNX Runtime does not write its inputs (Relu may run in place)")
	arr.Data[0] = 10
	require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
	assert.Equal(t, f32bytes(10, 2, 0, 4), y.GetData())
	assert.Equal(t, unsafe.Pointer(&arr.Data[0]), unsafe.Pointer(&x.GetData()[0]))
}

// An output goes on as the next run's input without a copy.
func TestChainedRuns(t *testing.T) {
	s := session(t, "relu_float32.onnx", "X")
	buf, err := dlpack.NewBuffer[float32]([]int64{3})
	require.NoError(t, err)
	copy(buf.Data(), []float32{-2, 0.5, 7})
	x, err := dlonnx.ToValue(buf)
	require.NoError(t, err)
	buf.Close()
	for i := 0; i < 3; i++ {
		y, err := dlonnx.NewOutput(dlpack.Float32, []int64{3})
		require.NoError(t, err)
		require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
		x.Destroy()
		x, err = dlonnx.ToValue(y)
		require.NoError(t, err)
		assert.Equal(t, unsafe.Pointer(&y.GetData()[0]), unsafe.Pointer(&x.GetData()[0]))
		y.Destroy() // x holds the memory now
	}
	assert.Equal(t, f32bytes(0, 0.5, 7), x.GetData())
	x.Destroy()
}

// Destroy, the producer's Close and a consumer's release, in every order:
// the producer's deleter runs once, after the last of them.
func TestOneLifetime(t *testing.T) {
	orders := map[string][]int{"destroy,close,release": {0, 1, 2}, "close,release,destroy": {1, 2, 0},
		"release,destroy,close": {2, 0, 1}, "close,destroy,release": {1, 0, 2}}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			models(t)
			ct := cTensor(dlpack.Float32, []int64{2, 2}, nil, f32bytes(1, 2, 3, 4), 0)
			f, err := dlpack.Import(ct.Ptr)
			require.NoError(t, err)
			x, err := dlonnx.ToValue(f)
			require.NoError(t, err)
			m, err := dlpack.Produce(x, dlpack.Request{})
			require.NoError(t, err)
			steps := []func(){func() { x.Destroy() }, func() { f.Close() }, func() { m.Close() }}
			for i, k := range order {
				assert.Equal(t, int64(0), ct.Deletes(), "before step %d", i)
				steps[k]()
			}
			assert.Equal(t, int64(1), ct.Deletes())
			assert.Equal(t, int64(0), dlpack.Outstanding())
			x.Destroy() // idempotent
			assert.Equal(t, int64(1), ct.Deletes())
		})
	}
}

// An output read by a C consumer after the Go owner destroyed it: the
// memory and ORT's value live until the consumer's deleter.
func TestOutputOutlivesDestroy(t *testing.T) {
	s := session(t, "relu_float32.onnx", "X")
	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{1, -2, 3}, []int64{3}))
	require.NoError(t, err)
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{3})
	require.NoError(t, err)
	require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
	x.Destroy()
	m, err := dlpack.Produce(y, dlpack.Request{})
	require.NoError(t, err)
	legacy, err := dlpack.Produce(y, dlpack.Request{Legacy: true})
	require.NoError(t, err)
	require.NotNil(t, legacy.Legacy)
	y.Destroy()
	runtime.GC()
	assert.Equal(t, 4.0, cshim.SumVersioned(m.Pointer()))
	assert.Equal(t, 4.0, cshim.SumLegacy(legacy.Pointer()))
	cshim.ReleaseVersioned(m.Pointer())
	cshim.ReleaseLegacy(legacy.Pointer())
	assert.Equal(t, int64(0), dlpack.Outstanding())
	_, err = dlpack.Produce(y, dlpack.Request{})
	assert.ErrorIs(t, err, dlpack.ErrClosed, "nothing left to hand out")
}

// What ToValue cannot share is refused with the sentinel and field,
// holds nothing, and leaves the caller's Foreign as it was; CopyToValue
// copies the layouts and read-only tensors.
func TestRefusalsAndCopies(t *testing.T) {
	data := f32bytes(1, 2, 3, 4, 5, 6)
	cases := []struct {
		name    string
		tensor  func() cshim.Tensor
		want    error
		field   string
		copied  []float32
		refuses bool // CopyToValue refuses it too
	}{
		{"read-only", func() cshim.Tensor {
			return cTensor(dlpack.Float32, []int64{2, 3}, nil, data, uint64(dlpack.FlagReadOnly))
		}, dlpack.ErrReadOnly, "", []float32{1, 2, 3, 4, 5, 6}, false},
		{"transposed", func() cshim.Tensor {
			return cTensor(dlpack.Float32, []int64{3, 2}, []int64{1, 3}, data, 0)
		}, dlpack.ErrLayout, "dl_tensor.strides", []float32{1, 4, 2, 5, 3, 6}, false},
		{"negative stride", func() cshim.Tensor {
			return cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 1, Code: 2, Bits: 32, Lanes: 1,
				Shape: []int64{3}, Strides: []int64{-2}, Data: data, ByteOffset: 16})
		}, dlpack.ErrLayout, "dl_tensor.strides", []float32{5, 3, 1}, false},
		{"broadcast", func() cshim.Tensor {
			return cTensor(dlpack.Float32, []int64{2, 3}, []int64{0, 1}, data, 0)
		}, dlpack.ErrLayout, "dl_tensor.strides", []float32{1, 2, 3, 1, 2, 3}, false},
		{"complex64", func() cshim.Tensor {
			return cTensor(dlpack.Complex64, []int64{3}, nil, append(data, data...), 0)
		}, dlpack.ErrDataType, "dl_tensor.dtype", nil, true},
		{"0-d", func() cshim.Tensor {
			return cTensor(dlpack.Float32, []int64{}, nil, data[:4], 0)
		}, dlpack.ErrShape, "dl_tensor.ndim", nil, true},
		{"CUDA", func() cshim.Tensor {
			return cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 2, NDim: 1, Code: 2, Bits: 32, Lanes: 1,
				Shape: []int64{2}, Strides: []int64{1}, DataAddr: 0x7f0000000000})
		}, dlpack.ErrDevice, "dl_tensor.device", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := c.tensor()
			f, err := dlpack.Import(ct.Ptr)
			require.NoError(t, err)
			defer func() {
				f.Close()
				assert.Equal(t, int64(1), ct.Deletes())
			}()
			_, err = dlonnx.ToValue(f)
			require.ErrorIs(t, err, c.want)
			var fe *dlpack.FieldError
			if c.field != "" {
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, c.field, fe.Field)
			}
			t.Log(err)
			assert.False(t, f.Closed(), "the caller's Foreign is untouched")
			assert.Equal(t, int64(0), ct.Deletes())

			if os.Getenv("ONNXRUNTIME_LIB") == "" && os.Getenv("DLONNX_MODELS") == "" {
				return // the copies need ONNX Runtime
			}
			cp, err := dlonnx.CopyToValue(f)
			if c.refuses {
				require.ErrorIs(t, err, c.want)
				return
			}
			require.NoError(t, err)
			defer cp.Destroy()
			assert.True(t, cp.Copied())
			assert.Equal(t, f32bytes(c.copied...), cp.GetData())
			assert.Equal(t, f.Shape(), cp.Shape())
		})
	}
}

// Empty tensors are made too (onnxruntime_go wants a byte of memory: the
// bridge lends one of its own).
func TestEmpty(t *testing.T) {
	s := session(t, "relu_float32.onnx", "X")
	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{}, []int64{0}))
	require.NoError(t, err)
	defer x.Destroy()
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{0})
	require.NoError(t, err)
	defer y.Destroy()
	require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
	g, err := dlpack.From(y)
	require.NoError(t, err)
	assert.Equal(t, int64(0), g.Len())
	g.Close()
}

// NewOutput refuses types and shapes ONNX Runtime cannot take.
func TestNewOutputRefusals(t *testing.T) {
	_, err := dlonnx.NewOutput(dlpack.Complex128, []int64{2})
	assert.ErrorIs(t, err, dlpack.ErrDataType)
	_, err = dlonnx.NewOutput(dlpack.Float32, nil)
	assert.ErrorIs(t, err, dlpack.ErrShape)
	_, err = dlonnx.NewOutput(dlpack.Float32, []int64{2, -1})
	assert.ErrorIs(t, err, dlpack.ErrShape)
	_, err = dlonnx.ElementType(dlpack.Float8E4M3FNUZ)
	assert.ErrorIs(t, err, dlpack.ErrDataType)
}

// A Tensor dropped without Destroy is released by its cleanup: the
// producer's deleter runs and Go memory is unpinned.
func TestUnreachableTensorIsReleased(t *testing.T) {
	models(t)
	ct := cTensor(dlpack.Int32, []int64{4}, nil, make([]byte, 16), 0)
	func() {
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		_, err = dlonnx.ToValue(f)
		require.NoError(t, err)
		f.Close()
		_, err = dlonnx.ToValue(dlpack.NewArray(make([]float32, 1000), []int64{10, 100}))
		require.NoError(t, err)
	}()
	for deadline := time.Now().Add(5 * time.Second); ct.Deletes() == 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int64(1), ct.Deletes())
}

// Many goroutines hand one output to consumers and release them while the
// owner destroys it: the memory is freed once, after the last.
func TestConcurrentConsumers(t *testing.T) {
	models(t)
	y, err := dlonnx.NewOutput(dlpack.Int64, []int64{16})
	require.NoError(t, err)
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				f, err := dlpack.From(y)
				if err != nil {
					done <- err
					return
				}
				xs, err := dlpack.Slice[int64](f)
				if err == nil && len(xs) != 16 {
					err = errors.New("wrong length")
				}
				f.Close()
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		require.NoError(t, <-done)
	}
	y.Destroy()
}
