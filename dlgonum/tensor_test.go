//go:build cgo

package dlgonum_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgonum"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
)

// settledOutstanding collects garbage until no export is outstanding (or
// five seconds pass) and returns the count.
func settledOutstanding() int64 {
	for deadline := time.Now().Add(5 * time.Second); dlpack.Outstanding() != 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return dlpack.Outstanding()
}

// A view of a matrix goes Go to Go through the protocol with gonum's row
// stride, sharing memory both ways, and comes back as a *mat.Dense.
func TestFromDenseRoundTrip(t *testing.T) {
	m := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	view := m.Slice(1, 3, 1, 4).(*mat.Dense)
	tn := dlgonum.FromDense(view)
	assert.Same(t, view, tn.Matrix())
	f, err := dlpack.From(tn)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, f.Shape())
	assert.Equal(t, []int64{4, 1}, f.Strides())
	assert.Equal(t, dlpack.Float64, f.DataType())
	assert.True(t, f.Writable())
	assert.Equal(t, uintptr(unsafe.Pointer(&view.RawMatrix().Data[0])), f.DataAddr()+uintptr(f.ByteOffset()), "shared, not copied")

	back, err := dlgonum.ToDense(f) // back owns f
	require.NoError(t, err)
	assert.True(t, mat.Equal(view, back))
	back.Set(1, 2, -1)
	assert.Equal(t, -1.0, m.At(2, 3), "a write through the consumer is a write to m")
	runtime.KeepAlive(back)
	assert.Equal(t, int64(0), settledOutstanding())
}

// Produce hands the matrix to a C consumer, versioned or legacy as the
// request says; the consumer's sum honours the row stride.
func TestFromDenseToC(t *testing.T) {
	m := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	view := m.Slice(0, 2, 1, 3).(*mat.Dense) // 2, 3; 6, 7
	p := dlgonum.FromDense(view)

	mv, err := dlpack.Produce(p, dlpack.Request{})
	require.NoError(t, err)
	require.NotNil(t, mv.Versioned)
	assert.Equal(t, 2+3+6+7.0, cshim.SumVersioned(mv.Pointer()))
	assert.Equal(t, int64(1), dlpack.Outstanding())
	cshim.ReleaseVersioned(mv.Pointer())

	ml, err := p.DLPack(dlpack.Request{Legacy: true}) // max_version=None: legacy
	require.NoError(t, err)
	require.NotNil(t, ml.Legacy)
	assert.Equal(t, 2+3+6+7.0, cshim.SumLegacy(ml.Pointer()))
	cshim.ReleaseLegacy(ml.Pointer())
	assert.Equal(t, int64(0), dlpack.Outstanding())
	assert.Equal(t, dlpack.CPUDevice, p.DLPackDevice())
}

// The C consumer may hold the tensor after Go dropped the matrix and the
// Tensor: the export keeps them alive.
func TestFromDenseOutlivesMatrix(t *testing.T) {
	mv := func() dlpack.Managed {
		m := mat.NewDense(64, 64, nil)
		for i := 0; i < 64; i++ {
			m.Set(i, i, 1)
		}
		mv, err := dlpack.Produce(dlgonum.FromDense(m), dlpack.Request{})
		require.NoError(t, err)
		return mv
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	junk := make([][]float64, 64)
	for i := range junk {
		junk[i] = make([]float64, 64*64)
		for j := range junk[i] {
			junk[i][j] = 1e9
		}
	}
	assert.Equal(t, 64.0, cshim.SumVersioned(mv.Pointer()))
	cshim.ReleaseVersioned(mv.Pointer())
	runtime.KeepAlive(junk)
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// A column of a matrix is a vector with the row stride as increment.
func TestFromVecDense(t *testing.T) {
	m := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	col := m.ColView(2).(*mat.VecDense)
	mv, err := dlpack.Produce(dlgonum.FromVecDense(col), dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, 3+7+11.0, cshim.SumVersioned(mv.Pointer()))
	f, err := mv.Import()
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, f.Shape())
	assert.Equal(t, []int64{4}, f.Strides())
	v, err := dlgonum.ToVecDense(f) // owns f
	require.NoError(t, err)
	v.SetVec(1, 70)
	assert.Equal(t, 70.0, m.At(1, 2))
	runtime.KeepAlive(v)
	assert.Equal(t, int64(0), settledOutstanding())
}

func TestFromCDense(t *testing.T) {
	m := mat.NewCDense(2, 3, []complex128{1 + 1i, 2, 3, 4, 5, 6 - 6i})
	view := m.Slice(0, 2, 1, 3).(*mat.CDense)
	mv, err := dlpack.Produce(dlgonum.FromCDense(view), dlpack.Request{})
	require.NoError(t, err)
	f, err := mv.Import()
	require.NoError(t, err)
	assert.Equal(t, dlpack.Complex128, f.DataType())
	assert.Equal(t, []int64{2, 2}, f.Shape())
	assert.Equal(t, []int64{3, 1}, f.Strides())
	c, err := dlgonum.CopyToCDense(f)
	require.NoError(t, err)
	assert.True(t, mat.CEqual(view, c))
	f.Close()
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// Empty matrices and vectors are tensors with zero dimensions.
func TestEmptyTensors(t *testing.T) {
	for _, c := range []struct {
		p     *dlgonum.Tensor
		shape []int64
		dt    dlpack.DataType
	}{
		{dlgonum.FromDense(&mat.Dense{}), []int64{0, 0}, dlpack.Float64},
		{dlgonum.FromVecDense(&mat.VecDense{}), []int64{0}, dlpack.Float64},
		{dlgonum.FromCDense(&mat.CDense{}), []int64{0, 0}, dlpack.Complex128},
	} {
		f, err := dlpack.From(c.p)
		require.NoError(t, err)
		assert.Equal(t, c.shape, f.Shape())
		assert.Equal(t, c.dt, f.DataType())
		f.Close()
		mv, err := dlpack.Produce(c.p, dlpack.Request{})
		require.NoError(t, err)
		cshim.ReleaseVersioned(mv.Pointer())
	}
	assert.Equal(t, int64(0), dlpack.Outstanding())
}

// A copy request gives an independent tensor marked IS_COPIED.
func TestFromDenseCopy(t *testing.T) {
	m := mat.NewDense(2, 2, []float64{1, 2, 3, 4})
	req := dlpack.Request{}
	req.Copy = dlpack.CopyAlways
	mv, err := dlpack.Produce(dlgonum.FromDense(m), req)
	require.NoError(t, err)
	f, err := mv.Import()
	require.NoError(t, err)
	assert.True(t, f.IsCopied())
	c, err := dlgonum.ToDense(f)
	require.NoError(t, err)
	c.Set(0, 0, 100)
	assert.Equal(t, 1.0, m.At(0, 0), "a copy")
	assert.True(t, mat.Equal(mat.NewDense(2, 2, []float64{100, 2, 3, 4}), c))
	runtime.KeepAlive(c)
	assert.Equal(t, int64(0), settledOutstanding())
}
