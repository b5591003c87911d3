//go:build unix

package dlarrow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/fault"
	"github.com/godlpack/dlpack/internal/filekind"
)

// File is an Arrow IPC file (Feather v2) read through a read-only memory
// map: its columns become tensors pointing into the mapping, so a file on
// disk reaches a consumer without a single copy of its data.
//
// The mapping lives until the File is closed and every Tensor made from
// it, and every export of those, has been released: each holds a reference
// to it. Only uncompressed files share; Column refuses a compressed column
// (arrow-go would decompress it into new memory) with ErrBuffer, and a
// dictionary-encoded column, as FromField does, with ErrType; the other
// columns of a file with dictionaries are shared as usual.
//
// How it reads: OpenFile walks the IPC messages of the file (the stream
// between the leading magic and the footer) and keeps, for each, the
// slices of the mapping holding its metadata and body; no data is read.
// Column hands the schema, the dictionary batches before the wanted record
// batch, and that batch, as those slices, to arrow-go's stream reader
// (ipc.NewReaderFromMessageReader), which builds arrays whose buffers are
// slices of the mapping. arrow-go's own mapped file reader
// (ipc.NewMappedFileReader) is not used: up to v18.8.0 at least it panics
// on any file whose schema has a dictionary-encoded field (its dictionary
// memo is never initialised: "assignment to entry in nil map" in
// dictutils.(*Mapper).AddField), and its copying twin, ipc.NewFileReader,
// copies every record batch body (TestIPCReadersCopyOrShare shows both).
// Before any metadata reaches arrow-go, checkMetadata verifies what
// arrow-go would trust fatally (vector lengths it allocates by, field
// nesting); the rest of its parsing is guarded by its own recovers, which
// turn malformed metadata into errors (ErrFormat). FuzzOpenFile holds all
// of it to: no input panics, faults or exhausts memory.
//
// A file cut short by another process while mapped makes reads of the lost
// pages fault; OpenFile and Column turn such a fault into an error
// wrapping ErrTruncated (see the package documentation).
type File struct {
	m       *mapping
	schema  *arrow.Schema
	schemaM message
	dicts   []message
	batches []batchRef
	closed  atomic.Bool
}

// message is one IPC message: its flatbuffer metadata and its body, both
// slices of the mapping (capacity cut to their length), and whether its
// body is compressed.
type message struct {
	meta, body []byte
	compressed bool
}

// batchRef is a record batch message and how many dictionary batches
// precede it in the file.
type batchRef struct {
	msg   message
	dicts int
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

// guard runs fn with faults in the mapping turned into ErrTruncated.
func (m *mapping) guard(what string, fn func() error) error {
	err := fault.Guard(uintptr(unsafe.Pointer(unsafe.SliceData(m.data))), uintptr(len(m.data)), fn)
	if fe, ok := err.(*fault.Error); ok {
		return &dlpack.FieldError{Field: what, Value: fe.Offset, Err: ErrTruncated, Why: fe.Error()}
	}
	return err
}

// arrowMagic opens and closes an Arrow IPC file; the stream starts 8 bytes
// in (the magic padded to 8).
const arrowMagic = "ARROW1"

// OpenFile maps the Arrow IPC file at path read-only, finds its messages
// and reads its schema. Files in the other byte order are refused
// (swapping them would write to the read-only mapping), as are empty
// files; a file that is not an Arrow IPC file, or whose messages run past
// its footer, fails with ErrFormat, and so does a path that is not a
// regular file (a named pipe, a directory, a device), at once. No file
// makes it panic (FuzzOpenFile).
func OpenFile(path string) (*File, error) {
	// Refused before the open: opening a named pipe blocks until a writer
	// comes, and a directory or a device has nothing to map.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, &dlpack.FieldError{Field: "file", Value: path, Err: ErrFormat, Why: "not a regular file: " + filekind.Of(st.Mode())}
	}
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
	f := &File{m: m}
	err = m.guard("file", func() error {
		if err := f.scan(); err != nil {
			return err
		}
		r, err := f.reader(nil)
		if err != nil {
			return arrowErr("schema", "message 0", err)
		}
		f.schema = r.Schema()
		r.Release()
		return nil
	})
	if err != nil {
		m.Release()
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	if !f.schema.IsNativeEndian() {
		m.Release()
		return nil, &dlpack.FieldError{Field: "schema.endianness", Value: f.schema.Endianness(), Err: ErrBuffer,
			Why: "the file's byte order is not this machine's"}
	}
	return f, nil
}

// scan checks the file's magic and footer length and walks its messages,
// recording where each lies. It reads the messages' framing and metadata,
// never a body.
func (f *File) scan() error {
	data := f.m.data
	n := len(data)
	const tail = 4 + len(arrowMagic)
	if n < 8+tail || string(data[:len(arrowMagic)]) != arrowMagic || string(data[n-len(arrowMagic):]) != arrowMagic {
		return &dlpack.FieldError{Field: "file.magic", Value: n, Err: ErrFormat, Why: "no ARROW1 at both ends: not an Arrow IPC file"}
	}
	footerLen := int64(int32(binary.LittleEndian.Uint32(data[n-tail:])))
	end := int64(n-tail) - footerLen // where the footer starts
	if footerLen <= 0 || end < 8 {
		return &dlpack.FieldError{Field: "footer.length", Value: footerLen, Err: ErrFormat, Why: fmt.Sprintf("does not fit in a file of %d bytes", n)}
	}
	pos := int64(8)
	for i := 0; pos < end; i++ {
		msg, next, eos, err := readMessage(data, pos, end)
		if err != nil {
			return &dlpack.FieldError{Field: fmt.Sprintf("message %d", i), Value: pos, Err: ErrFormat, Why: err.Error()}
		}
		if eos {
			break
		}
		typ, err := messageType(msg)
		if err != nil {
			return &dlpack.FieldError{Field: fmt.Sprintf("message %d", i), Value: pos, Err: ErrFormat, Why: err.Error()}
		}
		switch {
		case i == 0 && typ != ipc.MessageSchema:
			return &dlpack.FieldError{Field: "message 0", Value: typ.String(), Err: ErrFormat, Why: "the first message must be the schema"}
		case i == 0:
			f.schemaM = msg
		case typ == ipc.MessageDictionaryBatch:
			f.dicts = append(f.dicts, msg)
		case typ == ipc.MessageRecordBatch:
			f.batches = append(f.batches, batchRef{msg: msg, dicts: len(f.dicts)})
		default:
			return &dlpack.FieldError{Field: fmt.Sprintf("message %d", i), Value: typ.String(), Err: ErrFormat, Why: "not a dictionary or record batch"}
		}
		pos = next
	}
	if f.schemaM.meta == nil {
		return &dlpack.FieldError{Field: "message 0", Value: "none", Err: ErrFormat, Why: "the file holds no schema message"}
	}
	return nil
}

// readMessage reads the framing of the message at pos (before end): the
// continuation marker 0xFFFFFFFF (absent before format 0.15), the
// metadata length, the metadata, and the body whose length the metadata
// gives. eos reports the end-of-stream marker.
func readMessage(data []byte, pos, end int64) (msg message, next int64, eos bool, err error) {
	word := func() (uint32, error) {
		if end-pos < 4 {
			return 0, fmt.Errorf("ends %d bytes into a message header", end-pos)
		}
		w := binary.LittleEndian.Uint32(data[pos:])
		pos += 4
		return w, nil
	}
	w, err := word()
	if err != nil {
		return message{}, 0, false, err
	}
	if w == 0xFFFFFFFF {
		if w, err = word(); err != nil {
			return message{}, 0, false, err
		}
	}
	if w == 0 {
		return message{}, 0, true, nil
	}
	metaLen := int64(int32(w))
	if metaLen < 4 || metaLen > end-pos {
		return message{}, 0, false, fmt.Errorf("metadata length %d (%d bytes left before the footer)", metaLen, end-pos)
	}
	msg.meta = data[pos : pos+metaLen : pos+metaLen]
	pos += metaLen
	if msg.compressed, err = checkMetadata(msg.meta); err != nil {
		return message{}, 0, false, fmt.Errorf("malformed message metadata: %w", err)
	}
	bodyLen, err := bodyLength(msg.meta)
	if err != nil {
		return message{}, 0, false, err
	}
	if bodyLen < 0 || bodyLen > end-pos {
		return message{}, 0, false, fmt.Errorf("body length %d (%d bytes left before the footer)", bodyLen, end-pos)
	}
	msg.body = data[pos : pos+bodyLen : pos+bodyLen]
	return msg, pos + bodyLen, false, nil
}

// parsed wraps msg's slices as an ipc.Message (no copy).
func (msg message) parsed() *ipc.Message {
	return ipc.NewMessage(memory.NewBufferBytes(msg.meta), memory.NewBufferBytes(msg.body))
}

// bodyLength and messageType read a message's flatbuffer metadata through
// arrow-go, which does not verify flatbuffers: malformed metadata can make
// it index out of range. Those panics, and only they, are recovered here:
// arrow-go's own stream reader recovers its message parsing the same way,
// and there is no verifying parser to call instead.
func bodyLength(meta []byte) (n int64, err error) {
	defer recoverParse(&err)
	m := message{meta: meta}.parsed()
	defer m.Release()
	return m.BodyLen(), nil
}

func messageType(msg message) (t ipc.MessageType, err error) {
	defer recoverParse(&err)
	m := msg.parsed()
	defer m.Release()
	return m.Type(), nil
}

// recoverParse turns a panic of flatbuffer parsing (a runtime error of
// indexing) into an error; a memory fault panics on to the mapping's guard.
func recoverParse(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if re, ok := r.(interface{ Addr() uintptr }); ok && re != nil {
		panic(r)
	}
	*err = fmt.Errorf("malformed message metadata: %v", r)
}

// arrowErr is err, an error of arrow-go's reader, as an ErrFormat error
// naming field and value; a memory fault that arrow-go recovered into err
// is returned as it is, for the mapping's guard to recognise.
func arrowErr(field string, value any, err error) error {
	var ae interface{ Addr() uintptr }
	if errors.As(err, &ae) {
		return err
	}
	return &dlpack.FieldError{Field: field, Value: value, Err: ErrFormat, Why: err.Error()}
}

// messages is an ipc.MessageReader over recorded messages.
type messages struct {
	list []message
	next int
}

func (ms *messages) Message() (*ipc.Message, error) {
	if ms.next == len(ms.list) {
		return nil, io.EOF
	}
	m := ms.list[ms.next]
	ms.next++
	return m.parsed(), nil
}

func (ms *messages) Retain()  {}
func (ms *messages) Release() {}

// reader returns a stream reader over the schema, then the dictionary
// batches that precede b, then b (none when b is nil).
func (f *File) reader(b *batchRef) (*ipc.Reader, error) {
	list := []message{f.schemaM}
	if b != nil {
		list = append(append(list, f.dicts[:b.dicts]...), b.msg)
	}
	return ipc.NewReaderFromMessageReader(&messages{list: list}, ipc.WithEnsureNativeEndian(false))
}

// Schema is the file's schema.
func (f *File) Schema() *arrow.Schema { return f.schema }

// NumRecordBatches is the number of record batches in the file.
func (f *File) NumRecordBatches() int { return len(f.batches) }

// Column describes column col of record batch batch as a tensor pointing
// into the mapping (see FromField for the types it takes). The Tensor and
// each of its exports keep the mapping alive; Close the Tensor when done.
// It fails with dlpack.ErrClosed after Close, ErrBuffer for a compressed
// column, ErrType for a dictionary-encoded one, ErrFormat for a record
// batch arrow-go cannot read, ErrTruncated when the file was cut short
// under the mapping, and as FromArray otherwise.
func (f *File) Column(batch, col int) (*Tensor, error) {
	if f.closed.Load() {
		return nil, &dlpack.FieldError{Field: "dlarrow.File", Value: "closed", Err: dlpack.ErrClosed}
	}
	if batch < 0 || batch >= len(f.batches) {
		return nil, &dlpack.FieldError{Field: "record batch", Value: batch, Err: dlpack.ErrShape, Why: fmt.Sprintf("the file has %d", len(f.batches))}
	}
	ref := &f.batches[batch]
	if ref.msg.compressed || anyCompressed(f.dicts[:ref.dicts]) {
		return nil, &dlpack.FieldError{Field: "record batch", Value: batch, Err: ErrBuffer,
			Why: "compressed: its columns would be decompressed into new memory; write the file uncompressed to share it"}
	}
	var t *Tensor
	err := f.m.guard(fmt.Sprintf("record batch %d", batch), func() error {
		r, err := f.reader(ref)
		if err != nil {
			return arrowErr("schema", "message 0", err)
		}
		defer r.Release()
		if !r.Next() {
			err := r.Err()
			if err == nil {
				err = errors.New("no record batch read")
			}
			return arrowErr("record batch", batch, err)
		}
		rec := r.RecordBatch()
		if col < 0 || col >= int(rec.NumCols()) {
			return &dlpack.FieldError{Field: "column", Value: col, Err: dlpack.ErrShape, Why: fmt.Sprintf("the file has %d columns", rec.NumCols())}
		}
		if err := checkBitmaps(rec.Column(col).Data(), 0); err != nil {
			return &dlpack.FieldError{Field: "column " + rec.ColumnName(col), Value: batch, Err: ErrFormat, Why: err.Error()}
		}
		t, err = fromFileField(rec.Schema().Field(col), rec.Column(col))
		if err != nil {
			return fmt.Errorf("dlarrow: column %q: %w", rec.ColumnName(col), err)
		}
		if len(t.buf) > 0 && !f.m.contains(t.buf) {
			t.Close()
			t = nil
			return &dlpack.FieldError{Field: "column " + rec.ColumnName(col), Value: "compressed", Err: ErrBuffer,
				Why: "its buffer was decompressed into new memory; write the file uncompressed to share it"}
		}
		return nil
	})
	if err != nil {
		if t != nil {
			t.Close()
		}
		return nil, err
	}
	f.m.Retain()
	t.refs.keep = f.m
	return t, nil
}

// checkBitmaps refuses validity bitmaps shorter than their array, which
// arrow-go's IPC reader builds from a file without checking and its
// NullN then indexes out of range (a null count of -1 in the file makes it
// count the bitmap).
func checkBitmaps(d arrow.ArrayData, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("arrays nested more than %d deep", maxFieldDepth)
	}
	if d.Len() < 0 || d.Offset() < 0 {
		return fmt.Errorf("length %d, offset %d", d.Len(), d.Offset())
	}
	if bufs := d.Buffers(); len(bufs) > 0 && bufs[0] != nil {
		if int64(bufs[0].Len())*8 < int64(d.Offset())+int64(d.Len()) {
			return fmt.Errorf("validity bitmap of %d bytes for %d values", bufs[0].Len(), d.Offset()+d.Len())
		}
	}
	for _, c := range d.Children() {
		if err := checkBitmaps(c, depth+1); err != nil {
			return err
		}
	}
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		return checkBitmaps(dict, depth+1)
	}
	return nil
}

// fromFileField is FromField on an array arrow-go's IPC reader built from
// the file. The last resort of this package's no-panic promise: arrow-go's
// arrays trust their buffers to be as long as their lengths say, which
// holds for arrays its builders make but not for arrays read from a
// malformed file (the IPC reader checks little), and their accessors then
// index out of range. checkMetadata and checkBitmaps refuse what is known
// to do that; any other runtime error of indexing or slicing here is
// recovered into ErrFormat. Nothing is retained on that path but Go
// memory (the mapping's reference is taken after), and a memory fault is
// passed on to the mapping's guard.
func fromFileField(field arrow.Field, arr arrow.Array) (t *Tensor, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		re, ok := r.(runtime.Error)
		if _, fault := r.(interface{ Addr() uintptr }); !ok || fault {
			panic(r)
		}
		t, err = nil, &dlpack.FieldError{Field: "column " + field.Name, Value: field.Type, Err: ErrFormat, Why: "inconsistent array: " + re.Error()}
	}()
	return FromField(field, arr)
}

func anyCompressed(ms []message) bool {
	for _, m := range ms {
		if m.compressed {
			return true
		}
	}
	return false
}

// Close drops the File's reference to the mapping; the mapping itself goes
// when the last Tensor and export made from the File are released. It is
// idempotent.
func (f *File) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.m.Release()
	}
	return nil
}
