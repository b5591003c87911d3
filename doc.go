// Package dlpack exchanges tensors between Go and any library that speaks
// DLPack, the in-memory tensor ABI shared by NumPy, PyTorch, JAX, CuPy,
// Arrow and most C/C++ array code, without copying the data.
//
// # Which path to take
//
// Two paths, one for each kind of value a caller holds:
//
//   - Any Go value (a slice, a gonum matrix, an image, an Arrow array, a
//     mapped file, a tensor imported earlier): the producer protocol.
//     [Produce] hands it to a C, Rust or Python consumer as a managed
//     tensor; [From] takes it as a [Foreign] in Go, with no C at all. A
//     type joins by being a [Source] (it describes its memory) or a
//     [Producer] (it answers a [Request]); a copy is asked for, never
//     implied: Request{Copy: CopyAlways}.
//   - Raw C pointers (a DLManagedTensorVersioned* or DLManagedTensor* from
//     or for C code): [Import] and [ImportLegacy] take ownership of one,
//     [Borrow] and [BorrowLegacy] only for the length of a callback, and
//     [Export] and [ExportLegacy] lend a Go slice to C as one.
//
// Every bridge names its four directions the same way, after the package
// name: FromX (X into a tensor, no copy), ToX (a tensor to X, sharing
// memory), and CopyFromX/CopyToX for the explicit copies (dlgonum.FromDense,
// dlgonum.ToDense, dlgonum.CopyToDense). The README's bridges table lists
// them for every package.
//
// # Why some entry points come in pairs
//
// Each pair was weighed against one entry point with an option:
//
//   - Import/ImportLegacy, Borrow/BorrowLegacy, BorrowBatch/BorrowBatchLegacy
//     stay pairs. The suffix names the C struct p points at
//     (DLManagedTensorVersioned or DLManagedTensor), which an
//     unsafe.Pointer cannot carry and the bytes cannot tell: read with the
//     wrong layout, the deleter is found at the wrong offset. An option
//     would make that choice easy to forget in a list of requirements
//     (RequireNDim, AssumeWritable, ...), where every other option only
//     narrows what is accepted. Managed.Import picks the right one when
//     the kind is known from a Managed. BorrowTensor is the third kind, a
//     bare DLTensor with no deleter at all.
//   - From/FromRequest stay a pair: From is the zero Request (RequireWritable
//     makes it a writing one), and FromRequest states a copy, a device, a
//     stream or a legacy tensor. A request passed as an option would be the
//     one option that is not a requirement, and FromRequest(p, req) reads
//     as what it does.
//   - DefaultRequest is gone: the zero Request is the modern default.
//
// # The producer protocol
//
// A [Producer] hands out its tensor on request (the Go form of Python's
// __dlpack__), and [From] takes any producer as a [Foreign]. A [Source]
// only describes its memory and gets the rest from [Produce] and [From]:
// [Array] (a Go slice with a shape), [Buffer], [Foreign] (an import handed
// on, one release chain) and the bridges' types are Sources. Go to Go,
// From uses no C at all. Produce never hands a consumer a first element
// misaligned for its type ([DataType.Alignment]): such memory is copied,
// aligned and flagged [FlagIsCopied], or refused with [ErrAlignment] when
// the request forbids copies or the memory is on a device.
//
//	a := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
//	m, err := dlpack.Produce(a, dlpack.Request{}) // m.Pointer() for C
//	...
//	f, err := dlpack.From(a) // Go to Go: a Foreign sharing a's memory
//	defer f.Close()
//
// # Ownership
//
// A DLPack tensor is lent, never shared: exactly one party owns a managed
// tensor at any moment, and the borrower calls its deleter exactly once
// when done. [Export] lends Go memory to C: the data stays where it is,
// pinned, until the consumer calls the deleter, from any thread, at any
// time, and [Outstanding] counts exports not yet released. [Import] takes
// ownership of a foreign tensor after checking every field, and on any
// error releases it at once. The returned [Foreign] calls the producer's
// deleter exactly once on Close (a cleanup does it for owners never
// closed, and counts it), while [Borrow] releases when its callback
// returns. Whatever owns something is released by its Close method:
// [Foreign], [Managed], and the [ManagedTensorVersioned] an [Export]
// returns when it never reaches C, as in every bridge. Views of the data ([Slice], [ViewOf]) are valid only while the
// tensor is open, and read-only data is never handed out writable.
//
// # A round trip through C
//
//	xs := []float32{1, 2, 3, 4, 5, 6}
//	m, err := dlpack.Export(xs, []int64{2, 3}) // lend to C; C calls m's deleter
//	...
//	f, err := dlpack.Import(p) // p: a DLManagedTensorVersioned* from C
//	if err != nil {
//		return err // already released
//	}
//	defer f.Close()
//	ys, err := dlpack.Slice[float32](f)
//
// # From other cgo packages
//
// Each cgo package has its own C.DLManagedTensorVersioned type, distinct
// from [ManagedTensorVersioned] and from every other package's, including
// those of packages with their own dlpack.h. The layouts are the DLPack
// ABI (ours is checked against include/dlpack/dlpack.h at build time), so
// a pointer converts through unsafe.Pointer:
//
//	f, err := dlpack.Import(unsafe.Pointer(cptr))               // their C -> Go
//	C.consume((*C.DLManagedTensorVersioned)(unsafe.Pointer(m))) // Go export -> their C
//
// Their C code can include our header: cmd/dlpack-header writes it into a
// package for go generate, and go mod vendor keeps it with the module.
//
// # Errors
//
// Everything read from a foreign tensor is data: a bad value returns an
// error, never a panic. Errors wrap a sentinel (ErrShape, ErrDataType,
// ...) for errors.Is and are *[FieldError] values naming the field and
// value. Programming errors, such as an out-of-range index into a [View],
// panic like slice indexing does.
//
// # Related packages
//
// Package minifloat has the float16, bfloat16 and float8 element types.
// The bridges are producers and consumers of the protocol: dlgonum (gonum
// matrices), dlimage (the standard library's images), dlarrow (Apache
// Arrow Go arrays and memory-mapped IPC files), tensorfile (.npy, .npz and
// safetensors files, memory-mapped; cmd/tensorfile inspects and converts
// them), dlonnx (ONNX Runtime tensors), dlflight (tensors over Arrow
// Flight), dlgomlx (GoMLX tensors) and
// pycapsule (Go code loaded into Python: __dlpack__ and the C exchange
// API). The DLPack 1.3 exchange API is [PublishedExchangeAPI] and
// [OpenExchangeAPI].
//
// # Without cgo
//
// Built with CGO_ENABLED=0, the package keeps its types, names, parsing
// and validation; every operation that allocates C memory or calls a C
// deleter returns [ErrCgoRequired].
package dlpack
