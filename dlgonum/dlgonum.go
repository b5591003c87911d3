// Package dlgonum converts between DLPack tensors and gonum matrices
// (gonum.org/v1/gonum/mat), without copying whenever the layout allows.
//
// Export: ExportDense, ExportVecDense and ExportCDense lend a matrix's
// backing slice to a C consumer; the row stride (or vector increment)
// becomes the DLPack stride, so views such as m.Slice(...) export as they
// are.
//
// The protocol: DenseTensor, VecDenseTensor and CDenseTensor make a
// matrix a dlpack.Source and dlpack.Producer with the same strides, for
// dlpack.From (Go to Go), dlpack.Produce (versioned or legacy, copies on
// request) and the Python capsule helpers.
//
// Import: Dense, VecDense and CDense wrap an imported float64 or complex128
// CPU tensor as a matrix sharing its memory, when its strides fit gonum's
// rules (unit column stride and row stride >= columns for matrices, a
// positive increment for vectors). The matrix takes over the tensor: it is
// released when the matrix becomes unreachable, so do not Close the
// Foreign while the matrix is in use. Read-only tensors (and legacy ones
// imported without dlpack.AssumeWritable) are refused with
// dlpack.ErrReadOnly, because gonum matrices are always writable; the
// Copy functions make an explicit copy of any layout, read-only or not,
// and leave the Foreign to the caller.
package dlgonum

import (
	"fmt"
	"runtime"

	"github.com/godlpack/dlpack"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/cblas128"
	"gonum.org/v1/gonum/mat"
)

// ExportDense lends m to a C consumer as a rows x cols float64 tensor with
// strides (row stride, 1), without copying. See dlpack.Export for the
// contract; m's data must not change while a consumer may read it.
func ExportDense(m *mat.Dense, opts ...dlpack.ExportOption) (*dlpack.ManagedTensorVersioned, error) {
	if m == nil {
		return nil, errNilMatrix
	}
	raw := m.RawMatrix()
	return dlpack.Export(raw.Data, []int64{int64(raw.Rows), int64(raw.Cols)},
		append([]dlpack.ExportOption{dlpack.WithStrides(int64(raw.Stride), 1)}, opts...)...)
}

// ExportVecDense lends v as a 1-d float64 tensor whose stride is v's
// increment, without copying.
func ExportVecDense(v *mat.VecDense, opts ...dlpack.ExportOption) (*dlpack.ManagedTensorVersioned, error) {
	if v == nil {
		return nil, errNilMatrix
	}
	raw := v.RawVector()
	return dlpack.Export(raw.Data, []int64{int64(raw.N)},
		append([]dlpack.ExportOption{dlpack.WithStrides(int64(raw.Inc))}, opts...)...)
}

// ExportCDense lends m as a rows x cols complex128 tensor, without copying.
func ExportCDense(m *mat.CDense, opts ...dlpack.ExportOption) (*dlpack.ManagedTensorVersioned, error) {
	if m == nil {
		return nil, errNilMatrix
	}
	raw := m.RawCMatrix()
	return dlpack.Export(raw.Data, []int64{int64(raw.Rows), int64(raw.Cols)},
		append([]dlpack.ExportOption{dlpack.WithStrides(int64(raw.Stride), 1)}, opts...)...)
}

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

// Dense wraps a float64 CPU matrix tensor as a *mat.Dense sharing its
// memory. It fails with dlpack.ErrReadOnly for read-only tensors,
// dlpack.ErrLayout when the strides do not fit gonum, dlpack.ErrShape for
// other ranks or empty tensors, and as dlpack.Span otherwise. On success
// the matrix owns f (see the package documentation).
func Dense(f dlpack.Foreign) (*mat.Dense, error) {
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

// CDense is Dense for complex128 tensors.
func CDense(f dlpack.Foreign) (*mat.CDense, error) {
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

// VecDense wraps a 1-d float64 CPU tensor with a positive stride as a
// *mat.VecDense sharing its memory; zero (broadcast) and negative strides
// fail with dlpack.ErrLayout. On success the vector owns f.
func VecDense(f dlpack.Foreign) (*mat.VecDense, error) {
	if f.NDim() != 1 || f.Dim(0) == 0 {
		return nil, layoutErr(dlpack.ErrShape, "dl_tensor.shape", f.Shape(), "a vector needs 1 non-empty dimension")
	}
	n, inc := f.Dim(0), f.Stride(0)
	if n == 1 {
		inc = 1
	}
	if inc < 1 {
		return nil, layoutErr(dlpack.ErrLayout, "dl_tensor.strides", f.Strides(), "gonum needs a positive increment; use CopyVecDense")
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

// CopyDense copies a float64 CPU matrix tensor of any layout (read-only,
// transposed, broadcast, negative strides) into a new *mat.Dense. The
// Foreign stays the caller's to close.
func CopyDense(f dlpack.Foreign) (*mat.Dense, error) {
	data, rows, cols, err := copy2D[float64](f)
	if err != nil {
		return nil, err
	}
	return mat.NewDense(rows, cols, data), nil
}

// CopyCDense is CopyDense for complex128 tensors.
func CopyCDense(f dlpack.Foreign) (*mat.CDense, error) {
	data, rows, cols, err := copy2D[complex128](f)
	if err != nil {
		return nil, err
	}
	return mat.NewCDense(rows, cols, data), nil
}

// CopyVecDense copies a 1-d float64 CPU tensor of any stride into a new
// *mat.VecDense.
func CopyVecDense(f dlpack.Foreign) (*mat.VecDense, error) {
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
