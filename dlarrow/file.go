//go:build unix

package dlarrow

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/godlpack/dlpack"
)

// File is an Arrow IPC file (Feather v2) read through a read-only memory
// map: its columns become tensors pointing into the mapping, so a file on
// disk reaches a consumer without a single copy of its data.
//
// The mapping lives until the File is closed and every Tensor made from
// it, and every export of those, has been released: each holds a reference
// to it. Only uncompressed files share; Column refuses a compressed column
// (arrow-go would decompress it into new memory) with ErrBuffer.
//
// It reads through ipc.NewMappedFileReader, which slices the buffers out
// of the mapping. ipc.NewFileReader, given the same bytes as an
// io.ReaderAt, copies every record batch body into fresh memory
// (basicReaderImpl.getBytes: make, then ReadAt); TestIPCReadersCopyOrShare
// shows both.
type File struct {
	m      *mapping
	rdr    *ipc.FileReader
	closed atomic.Bool
}

// mapping is the memory map and its reference count; the last Release
// unmaps it.
type mapping struct {
	data []byte
	refs atomic.Int64
}

func (m *mapping) Retain() { m.refs.Add(1) }

func (m *mapping) Release() {
	if m.refs.Add(-1) == 0 {
		_ = syscall.Munmap(m.data)
		m.data = nil
	}
}

// contains reports whether buf lies inside the mapping.
func (m *mapping) contains(buf []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= lo && p+uintptr(len(buf)) <= lo+uintptr(len(m.data))
}

// OpenFile maps the Arrow IPC file at path read-only and reads its footer
// and schema. Files in the other byte order are refused (swapping them
// would write to the read-only mapping), as are empty files.
func OpenFile(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dlarrow: %w", err)
	}
	defer osf.Close()
	st, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("dlarrow: %w", err)
	}
	if st.Size() == 0 || st.Size() != int64(int(st.Size())) {
		return nil, &dlpack.FieldError{Field: "file.size", Value: st.Size(), Err: ErrBuffer, Why: path + " cannot be an Arrow file"}
	}
	data, err := syscall.Mmap(int(osf.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("dlarrow: mmap %s: %w", path, err)
	}
	m := &mapping{data: data}
	m.refs.Store(1)
	rdr, err := ipc.NewMappedFileReader(data, ipc.WithEnsureNativeEndian(false))
	if err != nil {
		m.Release()
		return nil, fmt.Errorf("dlarrow: %s: %w", path, err)
	}
	if !rdr.Schema().IsNativeEndian() {
		rdr.Close()
		m.Release()
		return nil, &dlpack.FieldError{Field: "schema.endianness", Value: rdr.Schema().Endianness(), Err: ErrBuffer,
			Why: "the file's byte order is not this machine's"}
	}
	return &File{m: m, rdr: rdr}, nil
}

// Schema is the file's schema.
func (f *File) Schema() *arrow.Schema { return f.rdr.Schema() }

// NumRecordBatches is the number of record batches in the file.
func (f *File) NumRecordBatches() int { return f.rdr.NumRecords() }

// Column describes column col of record batch batch as a tensor pointing
// into the mapping (see FromField for the types it takes). The Tensor and
// each of its exports keep the mapping alive; Release the Tensor when done.
// It fails with dlpack.ErrClosed after Close, ErrBuffer for a compressed
// column, and as FromArray otherwise.
func (f *File) Column(batch, col int) (*Tensor, error) {
	if f.closed.Load() {
		return nil, &dlpack.FieldError{Field: "dlarrow.File", Value: "closed", Err: dlpack.ErrClosed}
	}
	rec, err := f.rdr.RecordBatchAt(batch)
	if err != nil {
		return nil, fmt.Errorf("dlarrow: record batch %d: %w", batch, err)
	}
	defer rec.Release()
	if col < 0 || col >= int(rec.NumCols()) {
		return nil, &dlpack.FieldError{Field: "column", Value: col, Err: dlpack.ErrShape, Why: fmt.Sprintf("the file has %d columns", rec.NumCols())}
	}
	t, err := FromField(rec.Schema().Field(col), rec.Column(col))
	if err != nil {
		return nil, fmt.Errorf("dlarrow: column %q: %w", rec.ColumnName(col), err)
	}
	if len(t.buf) > 0 && !f.m.contains(t.buf) {
		t.Release()
		return nil, &dlpack.FieldError{Field: "column " + rec.ColumnName(col), Value: "compressed", Err: ErrBuffer,
			Why: "its buffer was decompressed into new memory; write the file uncompressed to share it"}
	}
	f.m.Retain()
	t.refs.keep = f.m
	return t, nil
}

// Close drops the File's reference to the mapping; the mapping itself goes
// when the last Tensor and export made from the File are released. It is
// idempotent.
func (f *File) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.rdr.Close()
		f.m.Release()
	}
	return nil
}
