//go:build cgo

package dlonnx_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// squares returns a Tensor over [0, 1, ..., n-1] in Go memory and the
// squares Y = X * X gives.
func squares(t testing.TB, n int64) (*dlonnx.Tensor, []float32) {
	xs, want := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%251) - 125
		want[i] = xs[i] * xs[i]
	}
	x, err := dlonnx.ToValue(dlpack.NewArray(xs, []int64{n}))
	require.NoError(t, err)
	return x, want
}

func floats(t testing.TB, p dlpack.Producer) []float32 {
	f, err := dlpack.From(p)
	require.NoError(t, err)
	defer f.Close()
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	return append([]float32(nil), xs...)
}

// One output reshaped within its capacity takes runs of every shorter
// length without a new buffer; a longer one is refused.
func TestReshape(t *testing.T) {
	s := dlSession(t, "scale_float32.onnx")
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{100})
	require.NoError(t, err)
	defer y.Destroy()
	base := &y.GetData()[0]
	for _, n := range []int64{100, 7, 64, 1, 0, 99} {
		x, want := squares(t, n)
		require.NoError(t, y.Reshape([]int64{n}))
		assert.Equal(t, []int64{n}, y.Shape())
		require.NoError(t, s.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}))
		if n > 0 {
			assert.Equal(t, want, floats(t, y))
			assert.Same(t, base, &y.GetData()[0], "the same memory")
		}
		x.Destroy()
	}
	assert.ErrorIs(t, y.Reshape([]int64{101}), dlpack.ErrShape)
	assert.ErrorIs(t, y.Reshape(nil), dlpack.ErrShape)
	x, _ := squares(t, 3)
	assert.ErrorIs(t, x.Reshape([]int64{3}), dlpack.ErrRequirement, "ToValue shares its producer's memory")
	x.Destroy()
	y.Destroy()
	assert.ErrorIs(t, y.Reshape([]int64{3}), dlpack.ErrClosed)
}

// A Pool serves a loop of varying output shapes from a few buffers: after
// the first pass over the sizes it makes no new one, and buffers held by
// a consumer come back when the consumer lets go.
func TestPool(t *testing.T) {
	s := dlSession(t, "scale_float32.onnx")
	p := dlonnx.NewPool()
	defer p.Close()
	lengths := []int64{1, 60, 64, 65, 1000, 700, 3, 1024}
	for pass := 0; pass < 3; pass++ {
		for _, n := range lengths {
			x, want := squares(t, n)
			shapes, err := s.OutputShapes(x)
			require.NoError(t, err)
			y, err := p.Get(dlpack.Float32, shapes[0])
			require.NoError(t, err)
			require.NoError(t, s.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}))
			assert.Equal(t, want, floats(t, y))
			m, err := dlpack.Produce(y, dlpack.Request{}) // a C consumer outlives Destroy
			require.NoError(t, err)
			y.Destroy()
			x.Destroy()
			sum := 0.0
			for _, w := range want {
				sum += float64(w)
			}
			assert.Equal(t, sum, cshim.SumVersioned(m.Pointer()))
			cshim.ReleaseVersioned(m.Pointer()) // the buffer goes back now
		}
		if pass == 0 {
			assert.Equal(t, 3, p.Buffers(), "one buffer per class used (256 B, 512 B, 4 KiB): each came back before the next Get")
		}
	}
	assert.Equal(t, 3, p.Buffers(), "nothing allocated after the first pass")
	// Two outputs of one class held at once take two buffers.
	a, err := p.Get(dlpack.Float32, []int64{1000})
	require.NoError(t, err)
	b, err := p.Get(dlpack.Float32, []int64{900})
	require.NoError(t, err)
	assert.NotSame(t, &a.GetData()[0], &b.GetData()[0])
	assert.Equal(t, 4, p.Buffers())
	a.Destroy()
	b.Destroy()
	_, err = p.Get(dlpack.Complex64, []int64{2})
	assert.ErrorIs(t, err, dlpack.ErrDataType)
	_, err = p.Get(dlpack.Float32, []int64{-1})
	assert.ErrorIs(t, err, dlpack.ErrShape)
	p.Close()
	_, err = p.Get(dlpack.Float32, []int64{2})
	assert.ErrorIs(t, err, dlpack.ErrClosed)
}

// The soak: DLONNX_SOAK inferences (make onnx runs 100,000) whose output
// shapes vary every time, through Session.Run (NonZero: outputs from ONNX
// Runtime's arena) and a Pool (RunInto): the resident memory after them
// is what it was after the warm-up, give or take 32 MiB, and nothing is
// left outstanding.
func TestSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DLONNX_SOAK"))
	if n == 0 {
		t.Skip("DLONNX_SOAK is not set (make onnx runs 100,000)")
	}
	nz := dlSession(t, "nonzero_float32.onnx")
	sq := dlSession(t, "scale_float32.onnx")
	p := dlonnx.NewPool()
	defer p.Close()
	xs := make([]float32, 4096)
	for i := range xs {
		xs[i] = float32(i % 3)
	}
	step := func(i int) {
		n := int64(1 + (i*7919)%4096)
		x, err := dlonnx.ToValue(dlpack.NewArray(xs[:n], []int64{n}))
		require.NoError(t, err)
		outs, err := nz.Run(x)
		require.NoError(t, err)
		require.Equal(t, []int64{1, n - (n+2)/3}, outs[0].Shape())
		g, err := dlpack.From(outs[0])
		require.NoError(t, err)
		outs[0].Destroy()
		g.Close()
		y, err := p.Get(dlpack.Float32, []int64{n})
		require.NoError(t, err)
		require.NoError(t, sq.RunInto([]*dlonnx.Tensor{x}, []*dlonnx.Tensor{y}))
		y.Destroy()
		x.Destroy()
	}
	warm := min(n/10, 10000)
	for i := 0; i < warm; i++ {
		step(i)
	}
	before := rss(t)
	buffers := p.Buffers()
	for i := warm; i < n; i++ {
		step(i)
	}
	after := rss(t)
	t.Logf("%d inferences: resident %d MiB after the warm-up, %d MiB at the end; %d pool buffers", 2*n, before>>20, after>>20, p.Buffers())
	assert.Less(t, after, before+32<<20, "flat memory")
	assert.Equal(t, buffers, p.Buffers(), "no buffer made after the warm-up")
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// rss returns the resident set size of the process in bytes.
func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	var size, res int64
	_, err = fmt.Sscan(string(b), &size, &res)
	require.NoError(t, err)
	return res * int64(os.Getpagesize())
}
