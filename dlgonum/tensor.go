package dlgonum

import (
	"github.com/godlpack/dlpack"
	"gonum.org/v1/gonum/mat"
)

// Tensor is a gonum matrix or vector as a DLPack producer: it implements
// dlpack.Source and dlpack.Producer, so dlpack.Produce, dlpack.From and
// the pycapsule helpers take it without copying (unless the request asks
// for a copy). It describes the matrix's backing slice as it was when the
// Tensor was made, with gonum's strides: (row stride, 1) for matrices, the
// increment for vectors, so views such as m.Slice(...) are shared as they
// are.
//
// The Tensor is the description's Owner: it, the matrix and the backing
// slice stay reachable until the last consumer releases the tensor, even if
// the matrix is reset or reused meanwhile. Consumers may write through the
// tensor, so writes show in the matrix.
type Tensor struct {
	matrix  any // *mat.Dense, *mat.VecDense or *mat.CDense
	f64     []float64
	c128    []complex128
	complex bool // c128 holds the elements
	ndim    int
	shape   [2]int64
	strides [2]int64
}

// FromDense returns m as a rows x cols float64 tensor with strides (row
// stride, 1). An empty matrix (the zero Dense) is a (0, 0) tensor; a nil
// m gives a Tensor that every consumer refuses with dlpack.ErrNilPointer
// (as for FromVecDense and FromCDense).
func FromDense(m *mat.Dense) *Tensor {
	if m == nil {
		return &Tensor{} // describes nothing: ErrNilPointer
	}
	raw := m.RawMatrix()
	return &Tensor{matrix: m, f64: raw.Data, ndim: 2,
		shape: [2]int64{int64(raw.Rows), int64(raw.Cols)}, strides: [2]int64{int64(raw.Stride), 1}}
}

// FromVecDense returns v as a 1-d float64 tensor whose stride is v's
// increment. An empty vector is a (0,) tensor.
func FromVecDense(v *mat.VecDense) *Tensor {
	if v == nil {
		return &Tensor{}
	}
	raw := v.RawVector()
	return &Tensor{matrix: v, f64: raw.Data, ndim: 1,
		shape: [2]int64{int64(raw.N)}, strides: [2]int64{int64(raw.Inc)}}
}

// FromCDense returns m as a rows x cols complex128 tensor with strides
// (row stride, 1).
func FromCDense(m *mat.CDense) *Tensor {
	if m == nil {
		return &Tensor{}
	}
	raw := m.RawCMatrix()
	return &Tensor{matrix: m, c128: raw.Data, complex: true, ndim: 2,
		shape: [2]int64{int64(raw.Rows), int64(raw.Cols)}, strides: [2]int64{int64(raw.Stride), 1}}
}

// Matrix returns the *mat.Dense, *mat.VecDense or *mat.CDense the tensor
// was made from.
func (t *Tensor) Matrix() any { return t.matrix }

// DescribeTensor implements dlpack.Source: CPU memory of float64 or
// complex128 elements, the Tensor as Owner.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	if t == nil || t.matrix == nil {
		return errNilMatrix
	}
	if t.complex {
		dlpack.DescribeSlice(d, t.c128)
	} else {
		dlpack.DescribeSlice(d, t.f64)
	}
	d.Shape, d.Strides = t.shape[:t.ndim], t.strides[:t.ndim]
	d.Device = dlpack.CPUDevice
	d.Owner = t
	return nil
}

// DLPackDevice implements dlpack.Producer: gonum's memory is on the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer with dlpack.Produce.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(t, req) }
