package tensorfile

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/filekind"
)

// Option changes how a file is opened.
type Option struct {
	writable, skipMappedCRC, lazyMappedCRC bool
	maxNPYHeader                           int64 // 0: DefaultMaxNPYHeader
}

// DefaultMaxNPYHeader is the longest .npy header read unless
// MaxNPYHeader allows more: NumPy's default max_header_size (10,000
// bytes), far more than any header NumPy writes (64 dimensions take about
// 1,500).
const DefaultMaxNPYHeader = 10_000

// MaxNPYHeader sets the longest .npy header (the dict literal, in bytes)
// that is read, of a .npy file or of the members of an .npz, for trusted
// files whose headers exceed DefaultMaxNPYHeader, as NumPy's
// max_header_size does. The length is
// checked before the header is read: a longer one fails with ErrFormat,
// whatever the file's size.
func MaxNPYHeader(n int) Option { return Option{maxNPYHeader: int64(max(n, 1))} }

// ReadWrite maps the file read-write (shared): tensors are writable, and
// writes through them reach the file. Without it files are mapped
// read-only and every tensor is read-only (dlpack.FlagReadOnly); a
// consumer that asks for a writable tensor gets a copy or an error, never
// a writable view of the mapping.
func ReadWrite() Option { return Option{writable: true} }

// File is an opened tensor file: a .npy array, the members of a .npz
// archive, or the tensors of a safetensors file. Its tensors are views of
// one memory mapping of the file (or, for what cannot be mapped, of copies
// in dlpack.Buffers: see Tensor.Mapped).
//
// Lifetime: the mapping stays until Close has been called AND every tensor
// exported from the file (dlpack.From, dlpack.Produce, a capsule handed to
// Python) has been released, from any goroutine or C thread; then it is
// unmapped, once. After Close no new exports can be made (dlpack.ErrClosed), but
// those made before stay valid. LiveMappings counts mappings not yet
// unmapped.
//
// A File is safe for concurrent use.
type File struct {
	mu       sync.RWMutex
	closed   bool
	m        *mapping // nil when nothing is mapped (ReadNPY)
	writable bool
	// maxNPYHeader bounds .npy header lengths (0: DefaultMaxNPYHeader).
	maxNPYHeader int64
	tensors      []*Tensor
	byName       map[string]*Tensor // built by add, or on first use (index)
	indexOnce    sync.Once
	meta         map[string]string
	bufs         []*dlpack.Buffer[uint8]

	path  string      // as opened, for Lease
	info  os.FileInfo // of the mapped file, for Lease
	lease *lease      // nil until Lease
}

// mapping is one mmap of a file with a reference count: one reference for
// the File until Close, one per tensor description handed to a consumer
// until it calls ReleaseTensor. The last reference unmaps.
type mapping struct {
	data []byte
	refs atomic.Int64
	path string // the file mapped, for errors
}

var (
	liveMappings atomic.Int64
	unmaps       atomic.Int64 // for the tests: unmaps done
)

// LiveMappings returns the number of file mappings not yet unmapped: each
// File that maps its file counts one until it is closed and every tensor
// exported from it is released.
func LiveMappings() int64 { return liveMappings.Load() }

// ReleaseTensor drops one consumer's reference (dlpack.Releaser); it is
// called by the consumer side of package dlpack, exactly once per
// description.
func (m *mapping) ReleaseTensor() { m.release() }

func (m *mapping) release() {
	if m.refs.Add(-1) == 0 {
		m.unregister()
		_ = munmap(m.data) // cannot fail for a mapping we made
		m.data = nil
		unmaps.Add(1)
		liveMappings.Add(-1)
	}
}

// openFile opens path, maps it whole and returns a File owning the
// mapping, and the descriptor, for reading headers with pread: parsing
// reads headers through the descriptor, never through the mapping, so
// opening faults in no page of it (a fault in a large mapping of a file
// is what makes opening cost more for a large file).
func openFile(path string, opts []Option) (*File, *os.File, int64, error) {
	writable, maxNPY := false, int64(0)
	for _, o := range opts {
		writable = writable || o.writable
		if o.maxNPYHeader != 0 {
			maxNPY = o.maxNPYHeader
		}
	}
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	if err := regular(path); err != nil {
		return nil, nil, 0, err
	}
	fd, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, nil, 0, err
	}
	size := st.Size()
	if size == 0 {
		fd.Close()
		return nil, nil, 0, fieldErr(ErrTruncated, "file size", 0, "empty file")
	}
	if size != int64(int(size)) {
		fd.Close()
		return nil, nil, 0, fieldErr(ErrTruncated, "file size", size, "larger than the address space")
	}
	data, err := mmapFile(fd, size, writable)
	if err != nil {
		fd.Close()
		return nil, nil, 0, fmt.Errorf("tensorfile: mapping %s: %w", path, err)
	}
	m := &mapping{data: data, path: path}
	m.refs.Store(1)
	m.register()
	liveMappings.Add(1)
	return &File{m: m, writable: writable, maxNPYHeader: maxNPY, path: path, info: st}, fd, size, nil
}

// npyHeaderLimit is the longest .npy header f reads.
func (f *File) npyHeaderLimit() int64 {
	if f.maxNPYHeader > 0 {
		return f.maxNPYHeader
	}
	return DefaultMaxNPYHeader
}

// regular refuses a path that exists and is not a regular file, before
// it is opened: opening a named pipe blocks until a writer comes, and a
// directory or a device has nothing to map. Other errors are left to the
// open.
func regular(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() {
		return nil
	}
	return fieldErr(ErrFormat, "file", path, "not a regular file: "+filekind.Of(st.Mode()))
}

// readPrefix reads the first min(n, size) bytes of fd.
func readPrefix(fd io.ReaderAt, n, size int64) ([]byte, error) {
	b := make([]byte, min(n, size))
	if _, err := fd.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// at returns the address of byte off of the mapping, without touching it.
func (m *mapping) at(off int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), off)
}

// Close drops the File's reference to its mapping (and to its copied
// tensors' buffers). The memory is released now if no export is
// outstanding, else when the last consumer releases its tensor. Close is
// idempotent and safe to call from several goroutines.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.endLease()
	for _, b := range f.bufs {
		b.Close()
	}
	if f.m != nil {
		f.m.release()
	}
	return nil
}

// Tensors returns the file's tensors in file order (for safetensors, the
// order of their data; for .npz, the archive's order; a .npy file has one,
// named "").
func (f *File) Tensors() []*Tensor { return append([]*Tensor(nil), f.tensors...) }

// Tensor returns the tensor named name, or an error wrapping ErrNotFound.
func (f *File) Tensor(name string) (*Tensor, error) {
	f.indexOnce.Do(f.index)
	if t, ok := f.byName[name]; ok {
		return t, nil
	}
	return nil, fieldErr(ErrNotFound, "name", name, "")
}

// Metadata returns a copy of the safetensors __metadata__ (nil for other
// formats or when absent).
func (f *File) Metadata() map[string]string {
	if f.meta == nil {
		return nil
	}
	m := make(map[string]string, len(f.meta))
	for k, v := range f.meta {
		m[k] = v
	}
	return m
}

// Writable reports whether the file was opened with ReadWrite.
func (f *File) Writable() bool { return f.writable }

// MappedRange returns the address and length of the file's mapping while
// it is mapped (0, 0 when the File maps nothing, or after Close). Mapped
// tensors' data lies inside it; reading it there is reading the file as it
// is, unchecked (an .npz member's CRC-32 is checked by OpenNPZ, or by a
// LazyMappedCRC member's first export, never for reads made here).
func (f *File) MappedRange() (addr uintptr, size int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.m == nil || f.closed {
		return 0, 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data))), len(f.m.data)
}

// index builds byName for a File whose tensors were listed without add
// (safetensors: the header parse has checked that names are unique), so
// that opening a file of many tensors and listing them hashes each name
// once, not twice.
func (f *File) index() {
	if f.byName != nil {
		return
	}
	f.byName = make(map[string]*Tensor, len(f.tensors))
	for _, t := range f.tensors {
		f.byName[t.name] = t
	}
}

func (f *File) add(t *Tensor) error {
	if f.byName == nil {
		f.byName = make(map[string]*Tensor)
	}
	if _, dup := f.byName[t.name]; dup {
		return fieldErr(ErrFormat, "name", t.name, "two tensors of the same name")
	}
	t.file = f
	f.byName[t.name] = t
	f.tensors = append(f.tensors, t)
	return nil
}

// Tensor is one array of a File. It is a dlpack.Source and a
// dlpack.Producer: dlpack.From(t) gives a Foreign, dlpack.Produce(t, req)
// a managed tensor for C or Python; either shares the file's memory.
// A Tensor holds no reference itself: each export does, until released.
type Tensor struct {
	file     *File
	name     string
	dims     []int64 // the shape, then the strides (in elements) unless row-major compact
	nbytes   int64
	off      int64        // where the data starts in the mapping, when mapped
	x        *tensorExtra // nil for a mapped tensor that is no .npz member
	dtype    dlpack.DataType
	ndim     uint8
	readOnly bool
}

// tensorExtra is what a copied tensor or an .npz member holds beyond a
// view of the mapping: kept out of Tensor, of which a safetensors header
// can list millions, none needing it.
type tensorExtra struct {
	buf   *dlpack.Buffer[uint8] // the copy, when not mapped
	crcOK atomic.Bool           // an .npz member whose CRC-32 was checked
	lazy  *lazyCRC              // a mapped .npz member to check on first use (LazyMappedCRC)
}

// newTensor is a tensor of shape and strides (nil: row-major compact),
// which it keeps.
func newTensor(name string, dt dlpack.DataType, shape, strides []int64, nbytes int64, readOnly bool) *Tensor {
	t := &Tensor{name: name, dtype: dt, dims: shape, nbytes: nbytes, ndim: uint8(len(shape)), readOnly: readOnly}
	if strides != nil {
		t.dims = append(shape[:len(shape):len(shape)], strides...)
	}
	return t
}

// shape is the tensor's shape, not a copy.
func (t *Tensor) shape() []int64 { return t.dims[:t.ndim] }

// strides are the tensor's strides, not a copy, or nil for a row-major
// compact tensor whose strides are not kept.
func (t *Tensor) strides() []int64 {
	if len(t.dims) == int(t.ndim) {
		return nil
	}
	return t.dims[t.ndim:]
}

// extra returns t.x, made if needed; only while the File is being built.
func (t *Tensor) extra() *tensorExtra {
	if t.x == nil {
		t.x = new(tensorExtra)
	}
	return t.x
}

// buf is the copy of a tensor that is not mapped, else nil.
func (t *Tensor) buf() *dlpack.Buffer[uint8] {
	if t.x == nil {
		return nil
	}
	return t.x.buf
}

// data is the address of the tensor's first byte in the mapping, of a
// mapped tensor that has data; the caller holds the File's read lock.
func (t *Tensor) data() unsafe.Pointer { return t.file.m.at(t.off) }

// Name returns the tensor's name: the safetensors key, the .npz member
// name without ".npy", or "" for a .npy file.
func (t *Tensor) Name() string { return t.name }

// DataType returns the tensor's DLPack data type.
func (t *Tensor) DataType() dlpack.DataType { return t.dtype }

// Shape returns a copy of the shape.
func (t *Tensor) Shape() []int64 { return append([]int64(nil), t.shape()...) }

// Strides returns a copy of the strides, in elements: row-major, or
// column-major for Fortran-order .npy arrays.
func (t *Tensor) Strides() []int64 {
	if s := t.strides(); s != nil {
		return append([]int64(nil), s...)
	}
	return rowMajor(t.shape())
}

// rowMajor returns the strides, in elements, of a row-major compact
// tensor of shape.
func rowMajor(shape []int64) []int64 {
	strides := make([]int64, len(shape))
	n := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = n
		n *= shape[i]
	}
	return strides
}

// NBytes returns the size of the tensor's data in bytes.
func (t *Tensor) NBytes() int64 { return t.nbytes }

// Mapped reports whether the tensor is a view of the file's mapping (true
// for .npy tensors, safetensors tensors and stored .npz members aligned
// for their type: dlpack.DataType.Alignment) rather than a copy in a
// dlpack.Buffer (compressed .npz members; misaligned .npy, .npz and
// safetensors data; ReadNPY). Exports of a copy carry dlpack.FlagIsCopied.
func (t *Tensor) Mapped() bool { return t.buf() == nil }

// ReadOnly reports whether exports of the tensor are read-only.
func (t *Tensor) ReadOnly() bool { return t.readOnly }

// String describes the tensor, such as `"w" float32[2 3] mapped read-only`.
func (t *Tensor) String() string {
	s := fmt.Sprintf("%q %v%v", t.name, t.dtype, t.shape())
	if t.Mapped() {
		s += " mapped"
	} else {
		s += " copied"
	}
	if t.readOnly {
		s += " read-only"
	}
	return s
}
