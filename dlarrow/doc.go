// Package dlarrow shares Apache Arrow Go memory (github.com/apache/arrow-go/v18)
// with DLPack consumers and producers, in both directions, without copying.
//
//   - Into a tensor, no copy: FromArray, FromField, FromChunked, FromTensor.
//   - Out of a tensor, sharing memory: ToArray, ToTensor, ToField (an
//     (N, d1, ...) tensor as N rows of a fixed_shape_tensor column).
//   - Copies: CopyFromArray[T] (any primitive array, nulls filled and booleans
//     unpacked, to a new dlpack.Array), CopyToArray (a strided or bool
//     tensor to a new arrow.Array), CopyToField.
//
// # Out of Arrow (what pyarrow's __dlpack__ does, and more)
//
// FromArray describes an arrow.Array as a read-only CPU tensor sharing its
// values buffer: a 1-d tensor for int8..int64, uint8..uint64, float16,
// float32, float64 and the temporal types (their integer storage; Unit
// names the unit), an (N, w1, w2, ...) tensor for (nested)
// FixedSizeLists of those; FromField also reads Arrow's canonical
// fixed_shape_tensor extension (an (N, d1, d2, ...) tensor, permutation
// included) from a field's metadata. FromChunked gives one tensor per chunk of a
// column, FromTensor an N-d tensor of an arrow/tensor value (byte strides
// become element strides), and File.Column a column of an Arrow IPC file
// (Feather v2) read through a memory map. A Tensor is a dlpack.Source and
// a dlpack.Producer:
//
//	t, err := dlarrow.FromArray(arr)           // retains arr
//	if err != nil { return err }               // nulls, booleans, strings, ...
//	defer t.Release()
//	m, err := dlpack.Produce(t, dlpack.Request{}) // hand m to C, Rust, Python
//
// Arrow's reference count and DLPack's deleter are joined: every export
// retains the array (and the mapped file) and its deleter releases it, so
// the memory lives exactly as long as the last of the caller, the Tensor
// and every consumer needs it. The tensor is marked read-only, as Arrow
// memory is immutable; a consumer that asks for a writable tensor or a
// legacy one (which cannot carry the flag) gets a copy, or an error if it
// forbids copies. Arrays with nulls (ErrNulls), booleans (ErrBitPacked)
// and every other type (ErrType: dictionary, decimal, string, binary,
// nested) are refused; CopyFromArray is the explicit copy that fills nulls and
// unpacks booleans.
//
// arrow-go arrays carry no device: their memory is CPU memory (Go heap
// from the Go allocator, which dlpack pins while a C consumer holds it; C
// memory from cdata or the C allocator; a file mapping). In v18.8.0
// memory.Buffer has no device field, and the only device-aware entry of
// arrow/cdata (the async device stream) refuses producers whose
// device_type is not ARROW_DEVICE_CPU. So FromArray cannot meet device
// memory; on the way in, device tensors are refused with dlpack.ErrDevice.
//
// # Into Arrow
//
// ToArray wraps a compact CPU tensor as an arrow.Array sharing its memory
// (a primitive array for 1-d, nested FixedSizeLists for N-d); ToTensor
// wraps any tensor with non-negative strides as an arrow/tensor value. The
// Arrow buffer's allocator closes the Foreign when Arrow frees the buffer,
// so the producer's deleter runs at the array's last Release. CopyToArray
// is the explicit copy for strided and bool tensors.
//
// # Memory-mapped IPC files
//
// arrow-go has two IPC file readers. ipc.NewFileReader reads through an
// io.ReaderAt and copies every record batch body into new memory, even
// when the reader is a bytes.Reader over a memory map;
// ipc.NewMappedFileReader takes the bytes and slices every buffer out of
// them (TestIPCReadersCopyOrShare shows both), but panics on any file with
// a dictionary-encoded field. OpenFile maps the file, walks its IPC
// messages itself, and gives arrow-go's stream reader slices of the
// mapping (see File), and reference-counts the mapping: it is unmapped
// when the File is closed and the last Tensor and export of its columns
// are released. Dictionary columns are refused (ErrType). No file makes
// OpenFile or Column panic: malformed files fail with ErrFormat
// (FuzzOpenFile).
//
// What OpenFile checks: the magic at both ends; every message's framing
// and body length against the bytes before the footer; every message's
// metadata and the footer with the flatbuffers verifier's rules, as
// Arrow C++ (pyarrow) verifies them (alignment, bounds, vtables, strings,
// nesting), and the metadata version (V4 or V5); every buffer of every
// batch inside its body at a multiple of 8 bytes, and every column as long
// as its batch (both as Arrow C++ requires); and the footer against the
// stream. A sweep of single-bit flips of pyarrow-written files
// (TestOpenFileFlipSweep) holds this to: where pyarrow's file reader
// raises, OpenFile or Column fails; where both read, the values are
// equal; a flip outside the data buffers fails or reads the intact
// values. Arrow's
// file readers (pyarrow's open_file) follow the footer, this package the
// stream, so they must say the same: the footer's schema equals the
// stream's (fields, types, nullability, metadata), and its Blocks list the
// stream's dictionary and record batches with their offsets, metadata
// lengths and body lengths. Any disagreement is ErrFormat naming both
// values.
//
// Compressed files (BodyCompression: LZ4_FRAME, the default of pyarrow's
// feather.write_feather, or ZSTD) cannot be shared: Column decompresses
// the record batch (and compressed dictionary batches) into new Go memory,
// once per batch, and its tensors are copies (Tensor.Copied reports it;
// they hold no reference to the mapping). Each buffer's declared
// uncompressed length is checked against what the schema allows (length ×
// width for numbers, length / 8 for bitmaps, length + 1 offsets, the last
// offset for string data, padding to 64 bytes allowed) before anything is
// allocated; memory grows only as the decompressor produces bytes; and the
// decompressed size must equal the declared one, an LZ4 buffer being
// exactly one frame; else ErrFormat naming the batch and the buffer.
// Batches with columns whose buffers the schema does not bound (string
// and binary views) are refused compressed (ErrBuffer). arrow-go's own decompression is not used: it allocates
// whatever length the file declares and ignores bytes beyond it.
//
// # Files cut short under the mapping
//
// If another process truncates the file while it is mapped, reading a
// page past the new end raises SIGBUS, which kills a Go program. OpenFile
// and Column read the mapping (message headers, metadata, validity
// bitmaps) with the fault turned into an error wrapping ErrTruncated
// (runtime/debug.SetPanicOnFault for the duration of the read). The
// tensors they return point into the mapping: a consumer reading them
// after a truncation faults in its own code, as with any mapping (NumPy's
// memmap included); copy the data out (CopyToArray, or dlpack.Produce with
// dlpack.Request{Copy: dlpack.CopyAlways}) or make sure files
// are replaced by rename, never rewritten in place.
package dlarrow
