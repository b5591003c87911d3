//go:build unix

package dlarrow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/arrowfb"
	"github.com/godlpack/dlpack/internal/fault"
	"github.com/godlpack/dlpack/internal/filekind"
)

// File is an Arrow IPC file (Feather v2) read through a read-only memory
// map: its columns become tensors pointing into the mapping, so a file on
// disk reaches a consumer without a single copy of its data.
//
// The mapping lives until the File is closed and every Tensor made from
// it, and every export of those, has been released: each holds a reference
// to it. Only uncompressed files share: Column decompresses a compressed
// batch into new memory (see the package documentation: each buffer is
// bounded by the schema and checked), once per batch, and its tensors are
// Copied; the copy is kept with the File for the batch's other columns
// and goes with the File and the last of those tensors. A
// dictionary-encoded column is refused, as FromField does, with ErrType;
// the other columns of a file with dictionaries are shared as usual.
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
// turn malformed metadata into errors (ErrFormat). OpenFile also checks
// every batch's buffers against its body and the footer against the
// stream (checkFooter). FuzzOpenFile holds all of it to: no input panics,
// faults or exhausts memory.
//
// A file cut short by another process while mapped makes reads of the lost
// pages fault; OpenFile and Column turn such a fault into an error
// wrapping ErrTruncated (see the package documentation).
type File struct {
	m       *mapping
	schema  *arrow.Schema
	schemaM message
	footer  []byte // the footer's flatbuffer, a slice of the mapping
	dicts   []message
	batches []batchRef
	closed  atomic.Bool
	// the dictionary batches uncompressed (those that were compressed),
	// made once, at the first Column that needs them
	dictsOnce  sync.Once
	plainDicts []message
	dictsErr   error
}

// message is one IPC message: its flatbuffer metadata and its body, both
// slices of the mapping (capacity cut to their length), and whether its
// body is compressed.
type message struct {
	meta, body []byte
	compressed bool
	// where the message lies in the file: its first byte (the
	// continuation marker or the length), and the bytes of its framing
	// and metadata, as a footer Block gives them
	offset, metaSpan int64
}

// batchRef is a record batch message and how many dictionary batches
// precede it in the file; for a compressed one, its uncompressed form,
// made once, at the first Column that needs it.
type batchRef struct {
	msg   message
	dicts int
	once  sync.Once
	plain message
	err   error
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
// files; a file that is not an Arrow IPC file, whose messages run past
// its footer, whose buffers run past their body, or whose footer
// disagrees with its messages, fails with ErrFormat, and so does a path
// that is not a
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
		r, err := readerOf([]message{f.schemaM})
		if err != nil {
			return arrowErr("schema", "message 0", err)
		}
		f.schema = r.Schema()
		r.Release()
		if err := f.checkLengths(); err != nil {
			return err
		}
		return f.checkFooter()
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
	f.footer = data[end : n-tail : n-tail]
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
		case typ == ipc.MessageDictionaryBatch || typ == ipc.MessageRecordBatch:
			bm, err := readBatchMeta(msg.meta)
			if err == nil {
				err = bm.checkBuffers(int64(len(msg.body)))
			}
			if err != nil {
				return &dlpack.FieldError{Field: fmt.Sprintf("message %d", i), Value: pos, Err: ErrFormat, Why: err.Error()}
			}
			if typ == ipc.MessageDictionaryBatch {
				f.dicts = append(f.dicts, msg)
			} else {
				f.batches = append(f.batches, batchRef{msg: msg, dicts: len(f.dicts)})
			}
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
	msg.offset = pos
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
	msg.metaSpan = pos - msg.offset
	if err := arrowfb.Verify(msg.meta, arrowfb.Message); err != nil {
		return message{}, 0, false, fmt.Errorf("invalid flatbuffers message: %w", err)
	}
	if err := checkVersion(msg.meta); err != nil {
		return message{}, 0, false, err
	}
	if msg.compressed, err = arrowfb.Check(msg.meta); err != nil {
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

// checkVersion refuses metadata versions Arrow's readers refuse: before
// V4 (format 0.x, "Old metadata version not supported") and after V5.
func checkVersion(meta []byte) error {
	b := arrowfb.Buf(meta)
	root, _ := b.Deref(0)
	msg, ok := b.Table(root)
	if !ok {
		return errors.New("message table out of bounds")
	}
	v := 0 // V1, the default
	if p := msg.Field(4); p != 0 {
		u, _ := b.U16(p)
		v = int(int16(u))
	}
	if v < 3 || v > 4 {
		return fmt.Errorf("metadata version V%d: Arrow IPC files are V4 or V5", v+1)
	}
	return nil
}

// checkLengths checks, for each batch, that there are field nodes for
// every column and that each column is as long as the batch, which
// Arrow's readers require ("Array length did not match record batch
// length"): arrow-go reads the column by its own length. It also checks
// that the batch lists as many buffers as its columns take (counted up to
// the first column of a type buffersOf does not count), which Arrow's
// C++ reader requires ("buffer_index out of range"): arrow-go reads
// buffer descriptors past the end of the vector.
func (f *File) checkLengths() error {
	var dictTypes map[int64]arrow.DataType
	if len(f.dicts) > 0 {
		var err error
		if dictTypes, err = dictionaryTypes(f.schemaM.meta, f.schema); err != nil {
			return &dlpack.FieldError{Field: "schema", Value: "dictionaries", Err: ErrFormat, Why: err.Error()}
		}
	}
	check := func(what string, meta []byte, types []arrow.DataType) error {
		bm, err := readBatchMeta(meta)
		if err != nil {
			return &dlpack.FieldError{Field: what, Value: "metadata", Err: ErrFormat, Why: err.Error()}
		}
		i, bufs := 0, 0
		for c, t := range types {
			if i >= len(bm.nodes) {
				return &dlpack.FieldError{Field: what + ".nodes", Value: len(bm.nodes), Err: ErrFormat,
					Why: fmt.Sprintf("no field node for column %d", c)}
			}
			if bm.nodes[i].offset != bm.rows {
				return &dlpack.FieldError{Field: fmt.Sprintf("%s column %d length", what, c), Value: bm.nodes[i].offset, Err: ErrFormat,
					Why: fmt.Sprintf("the batch has %d rows", bm.rows)}
			}
			i += nodesOf(t, 0)
			if bufs >= 0 {
				if n := buffersOf(t, 0); n < 0 {
					bufs = -1
				} else if bufs += n; bufs > len(bm.buffers) {
					return &dlpack.FieldError{Field: what + ".buffers", Value: len(bm.buffers), Err: ErrFormat,
						Why: fmt.Sprintf("columns 0 to %d take at least %d buffers", c, bufs)}
				}
			}
		}
		return nil
	}
	types := make([]arrow.DataType, f.schema.NumFields())
	for i, fl := range f.schema.Fields() {
		types[i] = fl.Type
	}
	for i := range f.batches {
		if err := check(fmt.Sprintf("record batch %d", i), f.batches[i].msg.meta, types); err != nil {
			return err
		}
	}
	for i, d := range f.dicts {
		bm, _ := readBatchMeta(d.meta)
		t, ok := dictTypes[bm.dictID]
		if !ok {
			return &dlpack.FieldError{Field: fmt.Sprintf("dictionary batch %d id", i), Value: bm.dictID, Err: ErrFormat, Why: "no field has that dictionary"}
		}
		if err := check(fmt.Sprintf("dictionary batch %d", i), d.meta, []arrow.DataType{t}); err != nil {
			return err
		}
	}
	return nil
}

// nodesOf is how many field nodes a column of type t takes in a record
// batch: one per field of its type tree (a dictionary column's values
// are in its dictionary batch).
func nodesOf(t arrow.DataType, depth int) int {
	if depth > arrowfb.MaxFieldDepth {
		return 1
	}
	if ext, ok := t.(arrow.ExtensionType); ok {
		t = ext.StorageType()
	}
	n := 1
	if nt, ok := t.(arrow.NestedType); ok {
		for _, c := range nt.Fields() {
			n += nodesOf(c.Type, depth+1)
		}
	}
	return n
}

// buffersOf is how many buffers a column of type t takes in a record
// batch, or -1 for the types it does not count (null, unions,
// dictionaries, views, run-end encoded and any other layout): enough to
// check the columns before the first such one.
func buffersOf(t arrow.DataType, depth int) int {
	if depth > arrowfb.MaxFieldDepth {
		return -1
	}
	if ext, ok := t.(arrow.ExtensionType); ok {
		t = ext.StorageType()
	}
	children := func(n int, fields []arrow.Field) int {
		for _, f := range fields {
			c := buffersOf(f.Type, depth+1)
			if c < 0 {
				return -1
			}
			n += c
		}
		return n
	}
	switch t := t.(type) {
	case *arrow.FixedSizeListType, *arrow.StructType:
		return children(1, t.(arrow.NestedType).Fields()) // validity
	case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
		return children(2, t.(arrow.NestedType).Fields()) // validity, offsets
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		return 3 // validity, offsets, data
	case arrow.FixedWidthDataType:
		if t.ID() == arrow.NULL || t.ID() == arrow.DICTIONARY {
			return -1
		}
		return 2 // validity, data
	}
	return -1
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

// readerOf returns a stream reader over list: a schema message, then
// dictionary and record batches.
func readerOf(list []message) (*ipc.Reader, error) {
	return ipc.NewReaderFromMessageReader(&messages{list: list}, ipc.WithEnsureNativeEndian(false))
}

// stream returns the messages to read batch b from: the schema, the
// dictionary batches before it, and it, compressed ones uncompressed
// (decompressBatch), and whether any was.
func (f *File) stream(b *batchRef) (list []message, decompressed bool, err error) {
	f.dictsOnce.Do(func() {
		if !anyCompressed(f.dicts) {
			f.plainDicts = f.dicts
			return
		}
		types, err := dictionaryTypes(f.schemaM.meta, f.schema)
		if err != nil {
			f.dictsErr = err
			return
		}
		f.plainDicts = make([]message, len(f.dicts))
		for i, d := range f.dicts {
			if !d.compressed {
				f.plainDicts[i] = d
				continue
			}
			bm, _ := readBatchMeta(d.meta)
			t, ok := types[bm.dictID]
			if !ok {
				f.dictsErr = fmt.Errorf("dictionary batch %d: id %d is no field's", i, bm.dictID)
				return
			}
			if f.plainDicts[i], err = decompressBatch(d, []arrow.DataType{t}); err != nil {
				f.dictsErr = fmt.Errorf("dictionary batch %d: %w", i, err)
				return
			}
		}
	})
	if f.dictsErr != nil {
		return nil, false, f.dictsErr
	}
	b.once.Do(func() {
		b.plain = b.msg
		if b.msg.compressed {
			types := make([]arrow.DataType, f.schema.NumFields())
			for i, fl := range f.schema.Fields() {
				types[i] = fl.Type
			}
			b.plain, b.err = decompressBatch(b.msg, types)
		}
	})
	if b.err != nil {
		return nil, false, b.err
	}
	list = append(append([]message{f.schemaM}, f.plainDicts[:b.dicts]...), b.plain)
	return list, b.msg.compressed || anyCompressed(f.dicts[:b.dicts]), nil
}

// Schema is the file's schema.
func (f *File) Schema() *arrow.Schema { return f.schema }

// NumRecordBatches is the number of record batches in the file.
func (f *File) NumRecordBatches() int { return len(f.batches) }

// Column describes column col of record batch batch as a tensor pointing
// into the mapping (see FromField for the types it takes), or, for a
// compressed batch, into a decompressed copy (Tensor.Copied). The Tensor
// and each of its exports keep the mapping alive; Close the Tensor when
// done. It fails with dlpack.ErrClosed after Close, ErrType for a
// dictionary-encoded column, ErrFormat for a record batch arrow-go cannot
// read or a compressed buffer that is not what it declares, ErrBuffer for
// a compressed batch with a column type whose buffers are not bounded,
// ErrTruncated when the file was cut short under the mapping, and as
// FromArray otherwise.
func (f *File) Column(batch, col int) (*Tensor, error) {
	if f.closed.Load() {
		return nil, &dlpack.FieldError{Field: "dlarrow.File", Value: "closed", Err: dlpack.ErrClosed}
	}
	if batch < 0 || batch >= len(f.batches) {
		return nil, &dlpack.FieldError{Field: "record batch", Value: batch, Err: dlpack.ErrShape, Why: fmt.Sprintf("the file has %d", len(f.batches))}
	}
	ref := &f.batches[batch]
	var t *Tensor
	decompressed := false
	err := f.m.guard(fmt.Sprintf("record batch %d", batch), func() error {
		list, dec, err := f.stream(ref)
		if err != nil {
			var fe *dlpack.FieldError
			if errors.As(err, &fe) {
				return fmt.Errorf("dlarrow: record batch %d: %w", batch, err)
			}
			return &dlpack.FieldError{Field: "record batch", Value: batch, Err: ErrFormat, Why: "compressed: " + err.Error()}
		}
		decompressed = dec
		r, err := readerOf(list)
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
		if len(t.buf) > 0 && !decompressed && !f.m.contains(t.buf) {
			t.Close()
			t = nil
			return &dlpack.FieldError{Field: "column " + rec.ColumnName(col), Value: "copied", Err: ErrBuffer,
				Why: "arrow-go copied its buffer out of the mapping"}
		}
		return nil
	})
	if err != nil {
		if t != nil {
			t.Close()
		}
		return nil, err
	}
	if decompressed {
		// the body is Go memory, kept by the arrays that slice it
		t.copied = true
		return t, nil
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
	if depth > arrowfb.MaxFieldDepth {
		return fmt.Errorf("arrays nested more than %d deep", arrowfb.MaxFieldDepth)
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
