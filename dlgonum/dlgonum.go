package dlgonum

import (
	"fmt"
	"runtime"

	"github.com/godlpack/dlpack"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/cblas128"
	"gonum.org/v1/gonum/mat"
)

// matrixLayout checks f is a non-empty 2-d tensor whose strides fit gonum
// and returns rows, cols and the row stride.
func matrixLayout(f dlpack.Foreign) (rows, cols, stride int, err error) {
	if f.NDim() != 2 {
		return 0, 0, 0, layoutErr(dlpack.ErrShape, "dl_tensor.ndim", f.NDim(), "a matrix needs 2 dimensions")
	}
	r, c := f.Dim(0), f.Dim(1)
	if r == 0 || c == 0 {
		return 0, 0, 0, layoutErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "gonum matrices cannot be empty")
	}
	rs, cs := f.Stride(0), f.Stride(1)
	if c > 1 && cs != 1 {
		return 0, 0, 0, layoutErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), "gonum needs a column stride of 1; use a Copy function")
	}
	if r == 1 {
		rs = c // any stride of a single row will do
	}
	if rs < c {
		return 0, 0, 0, layoutErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), "gonum needs a row stride of at least the column count; use a Copy function")
	}
	return int(r), int(c), int(rs), nil
}

func layoutErr(sentinel error, field string, value any, why string) error {
	return &dlpack.FieldError{Field: field, Value: value, Err: sentinel, Why: why}
}

// keepUntilUnreachable releases f when the matrix x is collected.
func keepUntilUnreachable[T any](x *T, f dlpack.Foreign) {
	runtime.AddCleanup(x, func(f dlpack.Foreign) { f.Close() }, f)
}

// ToDense wraps a float64 CPU matrix tensor as a *mat.Dense sharing its
// memory. It fails with dlpack.ErrReadOnly for read-only tensors,
// dlpack.ErrLayout when the strides do not fit gonum, dlpack.ErrShape for
// other ranks or empty tensors, and as dlpack.Span otherwise. On success
// the matrix owns f (see the package documentation).
func ToDense(f dlpack.Foreign) (*mat.Dense, error) {
	rows, cols, stride, err := matrixLayout(f)
	if err != nil {
		return nil, err
	}
	data, err := dlpack.Span[float64](f)
	if err != nil {
		return nil, err
	}
	m := new(mat.Dense)
	m.SetRawMatrix(blas64.General{Rows: rows, Cols: cols, Stride: stride, Data: data})
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToCDense is ToDense for complex128 tensors.
func ToCDense(f dlpack.Foreign) (*mat.CDense, error) {
	rows, cols, stride, err := matrixLayout(f)
	if err != nil {
		return nil, err
	}
	data, err := dlpack.Span[complex128](f)
	if err != nil {
		return nil, err
	}
	m := new(mat.CDense)
	m.SetRawCMatrix(cblas128.General{Rows: rows, Cols: cols, Stride: stride, Data: data})
	keepUntilUnreachable(m, f)
	return m, nil
}

// ToVecDense wraps a 1-d float64 CPU tensor with a positive stride as a
// *mat.VecDense sharing its memory; zero (broadcast) and negative strides
// fail with dlpack.ErrLayout. On success the vector owns f.
func ToVecDense(f dlpack.Foreign) (*mat.VecDense, error) {
	if f.NDim() != 1 || f.Dim(0) == 0 {
		return nil, layoutErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "a vector needs 1 non-empty dimension")
	}
	n, inc := f.Dim(0), f.Stride(0)
	if n == 1 {
		inc = 1
	}
	if inc < 1 {
		return nil, layoutErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), "gonum needs a positive increment; use CopyToVecDense")
	}
	data, err := dlpack.Span[float64](f)
	if err != nil {
		return nil, err
	}
	v := new(mat.VecDense)
	v.SetRawVector(blas64.Vector{N: int(n), Inc: int(inc), Data: data})
	keepUntilUnreachable(v, f)
	return v, nil
}

// CopyToDense copies a float64 CPU matrix tensor of any layout (read-only,
// transposed, broadcast, negative strides) into a new *mat.Dense. The
// Foreign stays the caller's to close.
func CopyToDense(f dlpack.Foreign) (*mat.Dense, error) {
	data, rows, cols, err := copy2D[float64](f)
	if err != nil {
		return nil, err
	}
	return mat.NewDense(rows, cols, data), nil
}

// CopyToCDense is CopyToDense for complex128 tensors.
func CopyToCDense(f dlpack.Foreign) (*mat.CDense, error) {
	data, rows, cols, err := copy2D[complex128](f)
	if err != nil {
		return nil, err
	}
	return mat.NewCDense(rows, cols, data), nil
}

// CopyToVecDense copies a 1-d float64 CPU tensor of any stride into a new
// *mat.VecDense.
func CopyToVecDense(f dlpack.Foreign) (*mat.VecDense, error) {
	if f.NDim() != 1 || f.Dim(0) == 0 {
		return nil, layoutErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "a vector needs 1 non-empty dimension")
	}
	v, err := dlpack.ViewOf[float64](f)
	if err != nil {
		return nil, err
	}
	data := make([]float64, v.Len())
	if _, err := v.CopyTo(data); err != nil {
		return nil, err
	}
	return mat.NewVecDense(len(data), data), nil
}

func copy2D[T float64 | complex128](f dlpack.Foreign) ([]T, int, int, error) {
	if f.NDim() != 2 || f.Dim(0) == 0 || f.Dim(1) == 0 {
		return nil, 0, 0, layoutErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "a matrix needs 2 non-empty dimensions")
	}
	v, err := dlpack.ViewOf[T](f)
	if err != nil {
		return nil, 0, 0, err
	}
	data := make([]T, v.Len())
	if _, err := v.CopyTo(data); err != nil {
		return nil, 0, 0, fmt.Errorf("dlgonum: %w", err)
	}
	return data, int(f.Dim(0)), int(f.Dim(1)), nil
}

// errNilMatrix is the error for a nil matrix or vector.
var errNilMatrix = &dlpack.FieldError{Field: "matrix", Value: "nil", Err: dlpack.ErrNilPointer, Why: "nil matrix"}
