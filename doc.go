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
// Package minifloat has the float16, bfloat16 and float8 element types;
// package dlgonum converts to and from gonum matrices. The DLPack 1.3
// exchange API is [PublishedExchangeAPI] and [OpenExchangeAPI].
//
// # Without cgo
//
// Built with CGO_ENABLED=0, the package keeps its types, names, parsing
// and validation; every operation that allocates C memory or calls a C
// deleter returns [ErrCgoRequired].
package dlpack
