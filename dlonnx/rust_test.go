//go:build cgo && dlpark

package dlonnx_test

import (
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/internal/dlparkpeer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ort "github.com/yalue/onnxruntime_go"
)

// The Rust dlpark crate on both sides of ONNX Runtime: a tensor made by
// dlpark goes into ORT without a copy, and ORT's output goes to dlpark,
// which reads it and releases it (tag dlpark; make onnx runs it).
func TestRustBothWays(t *testing.T) {
	s := session(t, "relu_float32.onnx", "X")
	in := dlparkpeer.MakeBytes(dlpack.Float32, 4, f32bytes(-1, 2.5, -3, 4))
	f, err := dlpack.Import(in)
	require.NoError(t, err)
	addr := f.DataAddr()
	x, err := dlonnx.ToValue(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.False(t, x.Copied())
	assert.Equal(t, addr, uintptr(unsafe.Pointer(&x.GetData()[0])), "ORT reads dlpark's memory")
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{4})
	require.NoError(t, err)
	require.NoError(t, s.Run([]ort.Value{x}, []ort.Value{y}))
	x.Destroy()
	assert.Equal(t, int64(0), dlparkpeer.Live(), "dlpark's tensor released at Destroy")

	m, err := dlpack.Produce(y, dlpack.Request{})
	require.NoError(t, err)
	m2, err := dlpack.Produce(y, dlpack.Request{})
	require.NoError(t, err)
	y.Destroy() // dlpark's references keep the memory
	assert.Equal(t, 6.5, dlparkpeer.ConsumeSum(m.Pointer()))
	assert.Equal(t, f32bytes(0, 2.5, 0, 4), dlparkpeer.CopyBytes(m2.Pointer(), 16))
	assert.Equal(t, int64(0), dlpack.Outstanding())
}
