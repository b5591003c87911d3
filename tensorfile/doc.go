// Package tensorfile opens .npy, .npz and safetensors files as DLPack
// tensors without reading their data, and writes any DLPack producer to
// those formats.
//
//   - Into a tensor, no copy: OpenNPY, OpenNPZ, OpenSafetensors (each
//     tensor of the File a view of the mapping).
//   - Out of a tensor, sharing memory: CreateNPY, CreateSafetensors (a
//     file created mapped read-write, its tensors filled in place).
//   - Copies: ReadNPY (a .npy file read into memory, big-endian data
//     converted), WriteNPY, WriteNPZ, WriteSafetensors (any producer to a
//     file).
//
// The command line over this package is cmd/tensorfile (inspect, convert).
//
// # Into Go: OpenNPY, OpenNPZ, OpenSafetensors
//
// Opening maps the whole file (read-only, or read-write with ReadWrite)
// and parses its header through the file descriptor, never through the
// mapping, so no data page is touched: opening costs the same for 1 KiB
// as for 1 GiB. (An .npz archive's default open is the exception: it
// reads each mapped member once, through the mapping, for its CRC-32;
// LazyMappedCRC defers that to each member's first use.) (On Linux on amd64 and arm64, mappings of 64 MiB or more
// are placed, by address hints, in 1 GiB-aligned slots of an unused part
// of the address space, where the kernel maps and unmaps them without
// walking page tables shared with other mappings.) Each tensor of the File is a *Tensor, a dlpack.Source and
// dlpack.Producer whose data is its bytes in the mapping: dlpack.From(t)
// gives a Go Foreign, dlpack.Produce(t, req) a managed tensor for C,
// package pycapsule a capsule for Python; none copies.
//
//   - .npy (format 1.0, 2.0 and 3.0): C order gives row-major strides,
//     Fortran order column-major ones. Data misaligned for its element
//     type (a header not padded to 16 or 64 bytes, which NumPy reads) is
//     copied into a dlpack.Buffer instead, and refused by a ReadWrite open.
//     Python 2's long dimensions, (2L, 3L), are read from 1.0 and 2.0
//     headers, as NumPy reads them. Headers longer than NumPy's
//     max_header_size (DefaultMaxNPYHeader, 10,000 bytes) fail with
//     ErrFormat before they are read, in .npy files and .npz members;
//     MaxNPYHeader, an option of OpenNPY and ReadNPY, raises the bound
//     for trusted files. dtypes: bool, int8..int64,
//     uint8..uint64, float16, float32, float64, complex64, complex128, in
//     little-endian ('<') or no ('|') byte order. Big-endian data fails
//     with ErrByteOrder (ReadNPY converts it into a Buffer); object,
//     structured, string and datetime dtypes fail with ErrDType.
//   - .npz: members ending in ".npy", named without it (names decoded as
//     Python's zipfile decodes them: UTF-8 when flagged so, else CP437).
//     Each member's local header must agree with the central directory
//     (name, method, CRC-32, sizes; a data descriptor's when there is
//     one), else ErrFormat. Stored members whose data offset suits the
//     element's alignment are mapped; the others (misaligned, big-endian,
//     deflated, bzip2 and LZMA members: zip methods 8, 12, 14, which
//     Python's zipfile reads; the LZMA decoder is this package's own,
//     neither the standard library nor golang.org/x having one) are read
//     into a dlpack.Buffer each. Tensor.Mapped tells which. Every member
//     is checked against its CRC-32 as the archive opens (ErrChecksum),
//     the mapped ones by reading them once, unless OpenNPZ is given
//     LazyMappedCRC (each mapped member checked on its first use instead,
//     as np.load checks a member when it is read: a cheap open, and a
//     failing member fails every use of it) or SkipMappedCRC (never
//     checked); Tensor.CRCChecked tells.
//     OpenNPZ maps read-only (a write would leave the member's CRC stale).
//   - safetensors: tensors ordered by offset, each a view at 8 + N +
//     begin; a tensor misaligned there for its element type (a header
//     not padded to 8 bytes, as files written before the reference
//     implementation padded it have) is copied into a dlpack.Buffer
//     instead, and refused by a ReadWrite open. dtypes: BOOL, U8..U64, I8..I64, F16, BF16, F32, F64, C64,
//     F8_E4M3 (float8_e4m3fn), F8_E5M2, F8_E8M0 (float8_e8m0fnu),
//     F8_E4M3FNUZ, F8_E5M2FNUZ (float8_e4m3fnuz, float8_e5m2fnuz); the
//     sub-byte F4 and F6 types fail with ErrDType. Like the reference
//     implementation, the tensors must tile the data section exactly.
//
// # Lifetime
//
// A File's mapping is reference counted: one reference for the File until
// Close, one for each tensor exported from it until its consumer releases
// it (dlpack.Releaser, from any goroutine or C thread). The last one
// unmaps, exactly once; LiveMappings counts mappings not yet unmapped.
// After Close a File exports nothing more (dlpack.ErrClosed). A read-only
// mapping gives read-only tensors (dlpack.FlagReadOnly): a consumer asking
// for a writable tensor gets a copy or an error, never a writable view.
//
// # Files cut short while mapped
//
// If another process truncates (or rewrites in place) a file while it is
// mapped, the pages past its new end are gone, and a read of them raises
// SIGBUS, which kills a Go program ("fatal error: fault"). What this
// package reads itself cannot do that: the writers streaming a mapped
// tensor, Tensor.CopyTo and the CRC-32 checks of mapped .npz members
// read the mapping with the fault turned into an error wrapping
// ErrTruncated (runtime/debug.SetPanicOnFault, scoped to the read);
// ReadNPY and the copied members of OpenNPZ (with their CRC checks) read
// through the file descriptor, where a truncation is a short
// read, ErrTruncated too. Reads in your own code of a view of the mapping
// (dlpack.ReadOnlySlice of dlpack.From(t), a consumer in C or Python) are
// plain memory reads and still fault: copy with Tensor.CopyTo where a
// file may be cut short, or, on Linux, hold a lease (File.Lease) to learn
// that another process is opening the file for writing or truncating it
// before it can, and Close and reopen. Files replaced by rename (a new
// inode) never fault: the mapping keeps the old file.
//
// Peers do not guard: numpy.load(mmap_mode="r") and numpy.memmap read the
// pages directly, and the interpreter dies with SIGBUS on the first lost
// page (tried with NumPy 2 on Linux); the Rust safetensors crate parses a
// byte slice and leaves mapping to the caller, whose memmap2::Mmap::map is
// an unsafe call documented to SIGBUS when the file is truncated.
//
// # Out of Go: WriteNPY, WriteNPZ, WriteSafetensors
//
// The writers take any dlpack.Producer (a Foreign, a dlpack.Array, a
// Buffer, a Tensor of another File), with any strides, take it with
// dlpack.From, stream its elements in C order, and release it. WriteNPY
// writes format 1.0 (2.0 for huge headers) with the data 64-byte aligned,
// as NumPy does; WriteNPZ stores members 64-byte aligned in the archive
// (a padding extra field), so OpenNPZ maps every member of a stored
// archive it wrote; WriteSafetensors writes the file the reference
// implementation writes for the same tensors, byte for byte (checked
// against Python's safetensors), and CreateSafetensors the same header
// padded to 64 bytes.
//
// # Shared with other processes: CreateSafetensors, CreateNPY
//
// CreateSafetensors and CreateNPY create a file of given names, dtypes and
// shapes and open it mapped read-write (shared): its tensors are writable
// producers that Go fills in place, and another process that maps the
// file (safetensors.safe_open, numpy.load(mmap_mode="r"), OpenSafetensors)
// sees the same pages, with no copy and no socket.
//
// # Bad files
//
// Every malformed file is an error wrapping one of ErrFormat,
// ErrTruncated, ErrLayout, ErrDType, ErrByteOrder or ErrChecksum, and a
// *dlpack.FieldError naming the field and value; the catalogue is
// docs/rejects-files.md. Parsing never reads outside the file, and a
// failed open leaves nothing mapped.
//
// The formats are little-endian: the package supports little-endian hosts
// (amd64, arm64, riscv64, ...). Mapping needs a Unix system; elsewhere the
// Open functions fail with ErrUnsupported.
package tensorfile
