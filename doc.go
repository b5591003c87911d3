// Package dlpack exchanges tensors between Go and any library that speaks
// DLPack, the in-memory tensor ABI shared by NumPy, PyTorch, JAX, CuPy,
// Arrow and most C/C++ array code, without copying the data.
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
// returns. Views of the data ([Slice], [ViewOf]) are valid only while the
// tensor is open, and read-only data is never handed out writable.
//
// # A round trip
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
// # The producer protocol
//
// A [Producer] hands out its tensor on request (the Go form of Python's
// __dlpack__), and [From] takes any producer as a [Foreign]. A [Source]
// only describes its memory and gets the rest from [Produce] and [From]:
// [Array] (a Go slice with a shape), [Buffer], [Foreign] (an import handed
// on, one release chain) and the bridges' types are Sources. Go to Go,
// From uses no C at all.
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
// safetensors files, memory-mapped), dlonnx (ONNX Runtime tensors) and
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
