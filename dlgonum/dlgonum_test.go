//go:build cgo

package dlgonum_test

import (
	"encoding/binary"
	"math"
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

func f64bytes(v ...float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

// cMatrix makes a float64 tensor in C with the given shape and strides.
func cMatrix(shape, strides []int64, data ...float64) cshim.Tensor {
	return cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: int32(len(shape)), Code: 2, Bits: 64, Lanes: 1,
		Shape: shape, Strides: strides, Data: f64bytes(data...)})
}

// A product computed by gonum on a matrix that came from C, written into
// C's memory, and the result handed back to a C consumer.
func TestProductOfCMatrix(t *testing.T) {
	ct := cMatrix([]int64{2, 3}, []int64{3, 1}, 1, 2, 3, 4, 5, 6)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	a, err := dlgonum.ToDense(f)
	require.NoError(t, err)
	b := mat.NewDense(3, 2, []float64{7, 8, 9, 10, 11, 12})
	var c mat.Dense
	c.Mul(a, b)
	assert.Equal(t, []float64{58, 64, 139, 154}, c.RawMatrix().Data)

	a.Set(0, 0, 100) // writes C's memory
	assert.Equal(t, 100+2+3+4+5+6.0, cshim.SumVersioned(ct.Ptr))

	m, err := dlpack.Produce(dlgonum.FromDense(&c), dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, 58+64+139+154.0, cshim.SumVersioned(m.Pointer()))
	cshim.ReleaseVersioned(m.Pointer())
	assert.Equal(t, int64(0), dlpack.Outstanding())
	runtime.KeepAlive(a)
}

// A strided window of a larger C buffer (row stride 4 > 3 columns) is
// shared, not copied.
func TestDenseWithRowStride(t *testing.T) {
	ct := cMatrix([]int64{2, 3}, []int64{4, 1}, 1, 2, 3, -1, 4, 5, 6, -1)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	a, err := dlgonum.ToDense(f)
	require.NoError(t, err)
	assert.Equal(t, 4, a.RawMatrix().Stride)
	assert.True(t, mat.Equal(a, mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})))
	runtime.KeepAlive(a)
}

// The matrix keeps the imported tensor alive, and releases it when it is
// collected.
func TestDenseOwnsTheTensor(t *testing.T) {
	ct := cMatrix([]int64{2, 2}, []int64{2, 1}, 1, 2, 3, 4)
	func() {
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		a, err := dlgonum.ToDense(f)
		require.NoError(t, err)
		for i := 0; i < 5; i++ {
			runtime.GC()
		}
		assert.Equal(t, int64(0), ct.Deletes(), "alive while the matrix is")
		assert.Equal(t, 4.0, a.At(1, 1))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for ct.Deletes() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int64(1), ct.Deletes(), "released once the matrix is gone")
}

func TestDenseRefusals(t *testing.T) {
	cases := []struct {
		name  string
		spec  func() cshim.Spec
		err   error
		field string
	}{
		{"read-only", func() cshim.Spec {
			s := cMatrixSpec([]int64{2, 2}, []int64{2, 1})
			s.Flags = uint64(dlpack.FlagReadOnly)
			return s
		}, dlpack.ErrReadOnly, "flags"},
		{"transposed", func() cshim.Spec { return cMatrixSpec([]int64{2, 2}, []int64{1, 2}) }, dlpack.ErrLayout, "dl_tensor.strides"},
		{"overlapping rows", func() cshim.Spec { return cMatrixSpec([]int64{2, 2}, []int64{1, 1}) }, dlpack.ErrLayout, "dl_tensor.strides"},
		{"3-d", func() cshim.Spec { return cMatrixSpec([]int64{1, 2, 2}, []int64{4, 2, 1}) }, dlpack.ErrShape, "dl_tensor.ndim"},
		{"empty", func() cshim.Spec { return cMatrixSpec([]int64{0, 2}, []int64{2, 1}) }, dlpack.ErrShape, "dl_tensor.shape"},
		{"float32", func() cshim.Spec { s := cMatrixSpec([]int64{2, 2}, []int64{2, 1}); s.Bits = 32; return s }, dlpack.ErrTypeMismatch, "dl_tensor.dtype"},
	}
	for _, c := range cases {
		ct := cshim.Make(c.spec())
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err, c.name)
		_, err = dlgonum.ToDense(f)
		require.ErrorIs(t, err, c.err, c.name)
		var fe *dlpack.FieldError
		require.ErrorAs(t, err, &fe, c.name)
		assert.Equal(t, c.field, fe.Field, c.name)
		f.Close()
		assert.Equal(t, int64(1), ct.Deletes(), c.name)
	}
}

func cMatrixSpec(shape, strides []int64) cshim.Spec {
	return cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: int32(len(shape)), Code: 2, Bits: 64, Lanes: 1,
		Shape: shape, Strides: strides, Data: f64bytes(1, 2, 3, 4)}
}

// Copies accept any layout, read-only included, and never alias.
func TestCopyDense(t *testing.T) {
	s := cMatrixSpec([]int64{2, 2}, []int64{1, 2}) // transposed
	s.Flags = uint64(dlpack.FlagReadOnly)
	ct := cshim.Make(s)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	a, err := dlgonum.CopyToDense(f)
	require.NoError(t, err)
	assert.True(t, mat.Equal(a, mat.NewDense(2, 2, []float64{1, 3, 2, 4})))
	a.Set(0, 0, 99)
	ro, _ := dlpack.ReadOnlySlice[float64](f)
	assert.Nil(t, ro, "not compact")
	v, _ := dlpack.ViewOf[float64](f)
	x, _ := v.At(0, 0)
	assert.Equal(t, 1.0, x, "the copy does not alias")
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())

	// A reversed vector (x[::-1]): first element at byte offset 16.
	rs := cMatrixSpec([]int64{3}, []int64{-1})
	rs.ByteOffset = 16
	ct = cshim.Make(rs)
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	_, err = dlgonum.ToVecDense(f)
	assert.ErrorIs(t, err, dlpack.ErrLayout)
	rv, err := dlgonum.CopyToVecDense(f)
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 2, 1}, rv.RawVector().Data)
	f.Close()
	assert.Equal(t, int64(1), ct.Deletes())
}

func TestVectors(t *testing.T) {
	// A column of a 3x2 matrix: stride 2.
	ct := cMatrix([]int64{3}, []int64{2}, 1, 10, 2, 20, 3, 30)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	v, err := dlgonum.ToVecDense(f)
	require.NoError(t, err)
	assert.Equal(t, 2, v.RawVector().Inc)
	assert.Equal(t, 14.0, mat.Dot(v, v))

	w := mat.NewVecDense(4, []float64{1, 2, 3, 4})
	m, err := dlpack.Produce(dlgonum.FromVecDense(w.SliceVec(1, 3).(*mat.VecDense)), dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, 5.0, cshim.SumVersioned(m.Pointer()))
	cshim.ReleaseVersioned(m.Pointer())

	ct = cMatrix([]int64{3}, []int64{0}, 7)
	f, err = dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	_, err = dlgonum.ToVecDense(f)
	assert.ErrorIs(t, err, dlpack.ErrLayout, "broadcast vectors must be copied")
	c, err := dlgonum.CopyToVecDense(f)
	require.NoError(t, err)
	assert.Equal(t, []float64{7, 7, 7}, c.RawVector().Data)
	f.Close()
	runtime.KeepAlive(v)
}

func TestComplex(t *testing.T) {
	m := mat.NewCDense(2, 2, []complex128{1 + 1i, 2, 3, 4 - 1i})
	e, err := dlpack.Produce(dlgonum.FromCDense(m), dlpack.Request{})
	require.NoError(t, err)
	err = dlpack.Borrow(e.Pointer(), func(f dlpack.Foreign) error {
		c, err := dlgonum.CopyToCDense(f)
		if err == nil {
			assert.True(t, mat.CEqual(c, m))
		}
		return err
	})
	require.NoError(t, err)

	e, err = dlpack.Produce(dlgonum.FromCDense(m), dlpack.Request{})
	require.NoError(t, err)
	f, err := dlpack.Import(e.Pointer())
	require.NoError(t, err)
	c, err := dlgonum.ToCDense(f)
	require.NoError(t, err)
	c.Set(1, 1, 9i)
	assert.Equal(t, 9i, m.At(1, 1), "shared memory, Go -> Go")
	f.Close()
	assert.Equal(t, int64(0), dlpack.Outstanding())
	runtime.KeepAlive(c)
}

// readOnly is a Source whose tensors are read-only.
type readOnly struct{ dlpack.Source }

func (r readOnly) DescribeTensor(d *dlpack.Description) error {
	err := r.Source.DescribeTensor(d)
	d.ReadOnly = true
	return err
}

// Submatrix views export with their row stride.
func TestExportSubmatrix(t *testing.T) {
	big := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	sub := big.Slice(1, 3, 1, 3).(*mat.Dense) // 6 7 / 10 11
	m, err := dlpack.Produce(readOnly{dlgonum.FromDense(sub)}, dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 1}, unsafe.Slice(m.Versioned.DLTensor.Strides, 2))
	assert.Equal(t, dlpack.FlagReadOnly, m.Versioned.Flags)
	assert.Equal(t, 34.0, cshim.SumVersioned(m.Pointer()))
	cshim.ReleaseVersioned(m.Pointer())
	assert.Equal(t, int64(0), dlpack.Outstanding())
}
