// Package dlgonum converts between DLPack tensors and gonum matrices
// (gonum.org/v1/gonum/mat), without copying whenever the layout allows.
//
//   - Into a tensor, no copy: FromDense, FromVecDense, FromCDense.
//   - Out of a tensor, sharing memory: ToDense, ToVecDense, ToCDense.
//   - Copies: CopyToDense, CopyToVecDense, CopyToCDense.
//
// Into a tensor: FromDense, FromVecDense and FromCDense make a matrix a
// dlpack.Source and dlpack.Producer whose strides are gonum's (the row
// stride, or the vector's increment), so views such as m.Slice(...) are
// shared as they are. Hand the result to dlpack.From (Go to Go),
// dlpack.Produce (a C consumer: versioned or legacy, copies on request)
// or the Python capsule helpers:
//
//	m, err := dlpack.Produce(dlgonum.FromDense(a), dlpack.Request{})
//	// m.Pointer() is a DLManagedTensorVersioned* for C
//
// Out of a tensor: ToDense, ToVecDense and ToCDense wrap an imported
// float64 or complex128 CPU tensor as a matrix sharing its memory, when its
// strides fit gonum's rules (unit column stride and row stride >= columns
// for matrices, a positive increment for vectors). The matrix takes over
// the tensor: it is released when the matrix becomes unreachable, so do not
// Close the Foreign while the matrix is in use. Read-only tensors (and
// legacy ones imported without dlpack.AssumeWritable) are refused with
// dlpack.ErrReadOnly, because gonum matrices are always writable; the
// Copy functions make an explicit copy of any layout, read-only or not,
// and leave the Foreign to the caller.
package dlgonum
