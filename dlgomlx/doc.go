// Package dlgomlx passes tensors between GoMLX (github.com/gomlx/gomlx,
// v0.26.0) and DLPack, both ways.
//
//   - Into a tensor, no copy: FromTensor(t).
//   - Out of a tensor: ToTensor(p, backend) (shares a FromTensor export;
//     any other producer is copied once, as GoMLX cannot adopt memory it
//     did not allocate).
//   - Copies: CopyFromTensor, CopyToTensor.
//
// # Out of GoMLX: FromTensor
//
// FromTensor(t) is a Tensor, a dlpack.Source and dlpack.Producer, that
// describes t's elements where they are, when the CPU holds them:
//
//   - a local tensor (tensors.FromFlatDataAndDimensions, FromValue, a
//     result brought to the host): its flat slice;
//   - a tensor in a buffer of a backend with shared buffers (simplego's
//     results and inputs, tensors made by ToTensor on simplego): that
//     buffer, as Tensor.ConstFlatData reads it.
//
// No element is copied; the memory is handed out read-only, as GoMLX's
// ConstFlatData contract asks. A tensor that lives only on an accelerator
// (XLA on a GPU; simplego has none) is brought to the host by GoMLX's own
// transfer, Backend.BufferToFlatData, straight into memory of the Tensor:
// one copy, FlagIsCopied, and t gains no local copy. CopyFromTensor
// always copies, into memory the consumer may write.
//
// # Into GoMLX: ToTensor
//
// GoMLX v0.26.0 has no way to make a tensor over memory it did not
// allocate: FromShape, FromFlatDataAndDimensions and the backends'
// BufferFromFlatData copy, NewSharedBuffer allocates. So ToTensor(p,
// backend) shares only a FromTensor export (the GoMLX tensor itself comes
// back) and otherwise copies exactly once, into the memory the graph
// will read: a simplego shared buffer, which an execution reads in place
// (GoMLX's own path, FromFlatDataAndDimensions then an execution, copies
// twice); a device upload on other backends; a local tensor when backend
// is nil. Strided producers are copied into GoMLX's row-major layout.
// The producer's tensor is released before ToTensor returns, once.
// CopyToTensor always copies. ReadStats counts what was shared and what
// was copied, both ways.
//
// # Lifetimes
//
// A Tensor keeps the memory it describes reachable until the last
// consumer releases it (the deleter of a C or Python consumer, Close of a
// dlpack.Foreign); Exports(t) counts those consumers. GoMLX does not know
// about them, so while they are outstanding:
//
//   - t.FinalizeAll, t.ToLocal, t.MutableFlatData and donating t to an
//     execution (graph.DonateTensorBuffer) are harmless for a local
//     tensor: GoMLX drops or copies its flat slice but never writes it
//     again, and the consumer keeps reading the same values. (An
//     execution that takes a local tensor as input moves it into a
//     shared buffer; the Tensor keeps describing the slice it was made
//     from.)
//   - For a tensor in a backend buffer, t.FinalizeAll, t.ToLocal,
//     t.InvalidateOnDevice, donation, and t.MutableFlatData of a tensor
//     that is not flagged shared (an execution's result) give the buffer
//     back to the backend: simplego pools it and a later execution writes
//     there, under the consumer (the tests show both). Use FinalizeAll of
//     this package instead, which finalizes t when the last consumer is
//     done; FromTensor refuses t meanwhile, and a Tensor whose GoMLX
//     tensor was finalized hands out nothing more.
//   - Writes through t.MutableFlatData into the memory a Tensor describes
//     are seen by its consumers; do not write while a consumer reads.
//
// Copies (CopyFromTensor, accelerator transfers) owe nothing to t.
//
// Element types: bool, int8..int64, uint8..uint64, float16, bfloat16,
// float32, float64, complex64 and complex128 (DataType, DType). GoMLX's
// float16 (x448/float16) and bfloat16 have the bit layouts of DLPack's
// and package minifloat's. GoMLX's float8, 4-bit and 2-bit types have no
// Go storage in v0.26.0 and are refused with dlpack.ErrDataType.
package dlgomlx
