//go:build unix

package dlarrow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/arrowfb"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A compressed record batch (or dictionary batch) of an Arrow IPC file
// (BodyCompression in the Arrow columnar format) compresses each buffer
// of its body on its own: an int64 little-endian uncompressed length, -1
// for a buffer stored as it is, then an LZ4 frame or a Zstandard frame.
// arrow-go decompresses such a body itself, but sizes each buffer by the
// declared length alone (a file of a few bytes can make it allocate any
// amount) and ignores what follows the declared length. So this package
// decompresses the body itself, checking each buffer, and hands arrow-go
// an uncompressed message: a copy of the metadata with the new buffer
// offsets and lengths and without the compression field, and a new body
// in Go memory holding the buffers, each at a multiple of 64 bytes.

// span is a Buffer of a RecordBatch: where it lies in the body.
type span struct{ offset, length int64 }

// batchMeta is what a RecordBatch table says about its body.
type batchMeta struct {
	rows    int64
	nodes   []span // FieldNode: length, null_count
	buffers []span
	bufAt   int           // position in the metadata of the first Buffer struct
	codec   int           // CompressionType: 0 LZ4_FRAME, 1 ZSTD; -1 uncompressed
	rb      arrowfb.Table // the RecordBatch table
	msg     arrowfb.Table // the Message table
	dictID  int64         // a DictionaryBatch's id
}

// readBatchMeta reads the RecordBatch table of a record or dictionary
// batch message, every access bounds-checked (checkMetadata has checked
// the vectors).
func readBatchMeta(meta []byte) (batchMeta, error) {
	b := arrowfb.Buf(meta)
	root, _ := b.Deref(0)
	msg, ok := b.Table(root)
	if !ok {
		return batchMeta{}, errors.New("message table out of bounds")
	}
	header, present, ok := msg.SubTable(8)
	if !ok || !present {
		return batchMeta{}, errors.New("no message header")
	}
	bm := batchMeta{msg: msg, codec: -1}
	switch msg.U8(6) {
	case 2: // DictionaryBatch: id, data
		bm.dictID = header.I64(4)
		if header, present, ok = header.SubTable(6); !ok || !present {
			return batchMeta{}, errors.New("dictionary batch without data")
		}
	case 3:
	default:
		return batchMeta{}, fmt.Errorf("message header type %d is not a batch", msg.U8(6))
	}
	bm.rb = header
	bm.rows = header.I64(4)
	start, n, ok := header.Vector(6, 16)
	if !ok {
		return batchMeta{}, errors.New("record batch nodes out of bounds")
	}
	for i := 0; i < n; i++ {
		p := b[start+16*i:]
		bm.nodes = append(bm.nodes, span{int64(binary.LittleEndian.Uint64(p)), int64(binary.LittleEndian.Uint64(p[8:]))})
	}
	start, n, ok = header.Vector(8, 16)
	if !ok {
		return batchMeta{}, errors.New("record batch buffers out of bounds")
	}
	bm.bufAt = start
	for i := 0; i < n; i++ {
		p := b[start+16*i:]
		bm.buffers = append(bm.buffers, span{int64(binary.LittleEndian.Uint64(p)), int64(binary.LittleEndian.Uint64(p[8:]))})
	}
	comp, present, ok := header.SubTable(10)
	if !ok {
		return batchMeta{}, errors.New("record batch compression out of bounds")
	}
	if present {
		bm.codec = int(comp.U8(4))
		if bm.codec > 1 {
			return batchMeta{}, fmt.Errorf("compression codec %d (Arrow knows 0, LZ4_FRAME, and 1, ZSTD)", bm.codec)
		}
		if m := comp.U8(6); m != 0 {
			return batchMeta{}, fmt.Errorf("compression method %d (Arrow knows 0, BUFFER)", m)
		}
	}
	return bm, nil
}

// checkBuffers checks that every buffer of a batch lies inside its body of
// bodyLen bytes, at an offset that is a multiple of 8, as Arrow's IPC
// readers require (Arrow C++ refuses "did not start on 8-byte aligned
// offset").
func (bm batchMeta) checkBuffers(bodyLen int64) error {
	for i, s := range bm.buffers {
		if s.offset < 0 || s.length < 0 || s.offset > bodyLen || s.length > bodyLen-s.offset {
			return fmt.Errorf("buffer %d at [%d, +%d) is outside the body of %d bytes", i, s.offset, s.length, bodyLen)
		}
		if s.offset%8 != 0 {
			return fmt.Errorf("buffer %d at offset %d does not start on an 8-byte boundary", i, s.offset)
		}
	}
	for i, nd := range bm.nodes {
		if nd.offset < 0 || nd.length < -1 {
			return fmt.Errorf("field node %d: length %d, null count %d", i, nd.offset, nd.length)
		}
	}
	if bm.rows < 0 {
		return fmt.Errorf("record batch length %d", bm.rows)
	}
	return nil
}

// bufBound is what the schema says of a buffer's size: at most max bytes,
// or, for the values of a string or binary column, as many bytes as the
// last of the offsets in buffer offsets (of width bytes) says.
type bufBound struct {
	max            int64
	offsets, width int // offsets >= 0: bounded by that buffer's last offset
}

// bounds walks the fields as Arrow's IPC loader does (a field node per
// field, its buffers, then its children's) and returns the bound of each
// buffer. Types whose buffers it cannot bound from the schema (the
// string and binary views, whose data buffers are as many as the batch
// says) are refused.
type bounder struct {
	nodes  []span
	ni     int
	bounds []bufBound
}

func (w *bounder) node() (int64, error) {
	if w.ni >= len(w.nodes) {
		return 0, fmt.Errorf("%d field nodes for more fields", len(w.nodes))
	}
	n := w.nodes[w.ni].offset
	w.ni++
	return n, nil
}

// fixed is the bound of n values of bits bits each.
func fixed(n int64, bits int) bufBound {
	if n > (1<<62)/int64(max(bits, 1)) {
		return bufBound{max: 1 << 62, offsets: -1}
	}
	return bufBound{max: (n*int64(bits) + 7) / 8, offsets: -1}
}

func (w *bounder) field(t arrow.DataType, depth int) error {
	if depth > arrowfb.MaxFieldDepth {
		return fmt.Errorf("fields nested more than %d deep", arrowfb.MaxFieldDepth)
	}
	if ext, ok := t.(arrow.ExtensionType); ok {
		t = ext.StorageType()
	}
	if d, ok := t.(*arrow.DictionaryType); ok {
		t = d.IndexType // a record batch holds the indices
	}
	n, err := w.node()
	if err != nil {
		return err
	}
	validity := fixed(n, 1)
	switch t := t.(type) {
	case *arrow.NullType:
		return nil
	case arrow.FixedWidthDataType:
		w.bounds = append(w.bounds, validity, fixed(n, t.BitWidth()))
		return nil
	case arrow.BinaryDataType:
		width := 32
		if t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY {
			width = 64
		}
		if t.ID() != arrow.STRING && t.ID() != arrow.BINARY && width == 32 {
			break // views
		}
		w.bounds = append(w.bounds, validity, fixed(n+1, width), bufBound{offsets: len(w.bounds) + 1, width: width / 8})
		return nil
	case *arrow.ListType, *arrow.MapType:
		w.bounds = append(w.bounds, validity, fixed(n+1, 32))
		return w.field(t.(arrow.ListLikeType).Elem(), depth+1)
	case *arrow.LargeListType:
		w.bounds = append(w.bounds, validity, fixed(n+1, 64))
		return w.field(t.Elem(), depth+1)
	case *arrow.FixedSizeListType:
		w.bounds = append(w.bounds, validity)
		return w.field(t.Elem(), depth+1)
	case *arrow.ListViewType, *arrow.LargeListViewType:
		width := 32
		if t.ID() == arrow.LARGE_LIST_VIEW {
			width = 64
		}
		w.bounds = append(w.bounds, validity, fixed(n, width), fixed(n, width))
		return w.field(t.(arrow.ListLikeType).Elem(), depth+1)
	case *arrow.StructType, *arrow.SparseUnionType, *arrow.DenseUnionType, *arrow.RunEndEncodedType:
		switch t.ID() {
		case arrow.STRUCT:
			w.bounds = append(w.bounds, validity)
		case arrow.SPARSE_UNION: // no validity bitmap (format V5)
			w.bounds = append(w.bounds, fixed(n, 8))
		case arrow.DENSE_UNION:
			w.bounds = append(w.bounds, fixed(n, 8), fixed(n, 32))
		}
		for _, c := range t.(arrow.NestedType).Fields() {
			if err := w.field(c.Type, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return &dlpack.FieldError{Field: "column type", Value: t, Err: ErrBuffer, Why: "compressed columns of this type are not decompressed"}
}

// decompressBatch returns msg, a compressed batch whose fields are fields
// (a record batch's: the schema's; a dictionary batch's: its value type),
// as an uncompressed message with a new body in Go memory. Each buffer's
// declared uncompressed length is checked against what the schema allows
// before any memory is taken, memory grows only as the decompressor
// produces bytes, and the decompressed size must be the declared one.
func decompressBatch(msg message, fields []arrow.DataType) (message, error) {
	bm, err := readBatchMeta(msg.meta)
	if err != nil {
		return message{}, err
	}
	w := &bounder{nodes: bm.nodes}
	for _, t := range fields {
		if err := w.field(t, 0); err != nil {
			return message{}, err
		}
	}
	if w.ni != len(bm.nodes) || len(w.bounds) != len(bm.buffers) {
		return message{}, fmt.Errorf("%d field nodes and %d buffers for a schema of %d and %d", len(bm.nodes), len(bm.buffers), w.ni, len(w.bounds))
	}
	var dec interface {
		io.Reader
		reset(io.Reader) error
	}
	if bm.codec == 1 {
		z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return message{}, err
		}
		defer z.Close()
		dec = zstdReader{z}
	} else {
		dec = lz4Reader{lz4.NewReader(nil)}
	}
	out := make([][]byte, len(bm.buffers))
	for i, s := range bm.buffers {
		if s.length == 0 {
			continue
		}
		raw := msg.body[s.offset : s.offset+s.length]
		if len(raw) < 8 {
			return message{}, fmt.Errorf("compressed buffer %d of %d bytes has no uncompressed length", i, len(raw))
		}
		declared := int64(binary.LittleEndian.Uint64(raw))
		limit := w.bounds[i].max
		if o := w.bounds[i].offsets; o >= 0 {
			limit = lastOffset(out[o], w.bounds[i].width)
		}
		limit = (limit + 63) &^ 63 // writers may pad a buffer to 8 or 64 bytes
		switch {
		case declared == -1:
			if int64(len(raw)-8) > limit {
				return message{}, fmt.Errorf("buffer %d stored uncompressed: %d bytes where the schema allows %d", i, len(raw)-8, limit)
			}
			out[i] = raw[8:]
			continue
		case declared < 0 || declared > limit:
			return message{}, fmt.Errorf("buffer %d: uncompressed length %d where the schema allows %d", i, declared, limit)
		}
		if bm.codec == 0 {
			if err := checkLZ4Frame(raw[8:], declared); err != nil {
				return message{}, fmt.Errorf("buffer %d: %w", i, err)
			}
		}
		src := bytes.NewReader(raw[8:])
		if err := dec.reset(src); err != nil {
			return message{}, fmt.Errorf("buffer %d: %w", i, err)
		}
		if out[i], err = readExactly(dec, declared); err != nil {
			return message{}, fmt.Errorf("buffer %d: %w", i, err)
		}
		if src.Len() > 0 { // Arrow's codecs take exactly one frame
			return message{}, fmt.Errorf("buffer %d: %d bytes after the compressed frame", i, src.Len())
		}
	}
	// the new body: each buffer at a multiple of 64 bytes
	var size int64
	for _, b := range out {
		size += (int64(len(b)) + 63) &^ 63
	}
	body := dlpack.AlignedSlice[byte](int(size))
	meta := append([]byte(nil), msg.meta...)
	var at int64
	for i, b := range out {
		copy(body[at:], b)
		binary.LittleEndian.PutUint64(meta[bm.bufAt+16*i:], uint64(at))
		binary.LittleEndian.PutUint64(meta[bm.bufAt+16*i+8:], uint64(len(b)))
		at += (int64(len(b)) + 63) &^ 63
	}
	if p := bm.msg.Field(10); p != 0 && p+8 <= len(meta) { // Message.bodyLength
		binary.LittleEndian.PutUint64(meta[p:], uint64(size))
	}
	// drop the compression field: a copy of the RecordBatch's vtable,
	// appended, with the field absent (vtables may be shared, so the
	// original stays as it is)
	for len(meta)%2 != 0 {
		meta = append(meta, 0)
	}
	vt := len(meta)
	meta = append(meta, msg.meta[bm.rb.VT:bm.rb.VT+bm.rb.VTLen]...)
	if 10+2 <= bm.rb.VTLen {
		binary.LittleEndian.PutUint16(meta[vt+10:], 0)
	}
	binary.LittleEndian.PutUint32(meta[bm.rb.Pos:], uint32(int32(bm.rb.Pos-vt)))
	if compressed, err := arrowfb.Check(meta); err != nil || compressed {
		return message{}, fmt.Errorf("rewritten metadata: compressed %v, %v", compressed, err)
	}
	return message{meta: meta, body: body}, nil
}

// lastOffset is the last of the offsets (each width bytes) in b, 0 if
// none or negative.
func lastOffset(b []byte, width int) int64 {
	if len(b) < width {
		return 0
	}
	p := b[(len(b)/width-1)*width:]
	var v int64
	if width == 8 {
		v = int64(binary.LittleEndian.Uint64(p))
	} else {
		v = int64(int32(binary.LittleEndian.Uint32(p)))
	}
	return max(v, 0)
}

// readExactly reads n bytes from r, growing its buffer only as bytes
// come, and fails unless r holds exactly n.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, 0, min(n, 1<<20))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(n, 2*int64(cap(buf)))-int64(len(buf)))...)[:len(buf)]
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("decompressing: %w", err)
		}
		if k == 0 {
			return nil, errors.New("decompressing: no progress")
		}
	}
	if int64(len(buf)) != n {
		return nil, fmt.Errorf("decompresses to %d bytes, declared %d", len(buf), n)
	}
	var one [1]byte
	switch k, err := io.ReadFull(r, one[:]); {
	case k > 0:
		return nil, fmt.Errorf("decompresses to more than the declared %d bytes", n)
	case err != io.EOF:
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return buf, nil
}

// checkLZ4Frame checks that b is exactly one LZ4 frame (the LZ4 frame
// format: magic, descriptor, blocks up to an end mark, checksums), as
// Arrow's LZ4_FRAME codec requires ("Lz4 compressed input contains less
// than one frame", "... more than one frame"): the decoder used here would
// stop at the end of the content it expects and ignore a damaged end of
// frame. A content size in the descriptor must be the declared length.
func checkLZ4Frame(b []byte, declared int64) error {
	le := binary.LittleEndian
	if len(b) < 7 || le.Uint32(b) != 0x184D2204 {
		return errors.New("not an LZ4 frame")
	}
	flg, bd := b[4], b[5]
	if flg>>6 != 1 || flg&2 != 0 || bd&0x8F != 0 || bd>>4 < 4 {
		return fmt.Errorf("LZ4 frame descriptor %#02x %#02x", flg, bd)
	}
	maxBlock := 1 << (8 + 2*(bd>>4)) // 64 KiB, 256 KiB, 1 MiB, 4 MiB
	p := 6
	if flg&8 != 0 { // content size
		if len(b) < p+8 {
			return errors.New("LZ4 frame cut short")
		}
		if size := int64(le.Uint64(b[p:])); size != declared {
			return fmt.Errorf("LZ4 frame of %d bytes of content, declared %d", size, declared)
		}
		p += 8
	}
	if flg&1 != 0 { // dictionary id
		p += 4
	}
	p++ // header checksum
	blockSum := 0
	if flg&16 != 0 {
		blockSum = 4
	}
	for {
		if len(b) < p+4 {
			return errors.New("LZ4 frame cut short")
		}
		size := int(le.Uint32(b[p:]) &^ (1 << 31))
		p += 4
		if le.Uint32(b[p-4:]) == 0 {
			break
		}
		if size > maxBlock || len(b)-p < size+blockSum {
			return fmt.Errorf("LZ4 block of %d bytes (at most %d, %d left)", size, maxBlock, len(b)-p)
		}
		p += size + blockSum
	}
	if flg&4 != 0 { // content checksum
		p += 4
	}
	if p != len(b) {
		return fmt.Errorf("%d bytes after the LZ4 frame of %d", len(b)-p, p)
	}
	return nil
}

type zstdReader struct{ *zstd.Decoder }

func (z zstdReader) reset(r io.Reader) error { return z.Reset(r) }

type lz4Reader struct{ *lz4.Reader }

func (z lz4Reader) reset(r io.Reader) error { z.Reset(r); return nil }

// dictionaryTypes maps the dictionary ids of the schema message to the
// value types of their fields: the flatbuffer's fields and the arrow-go
// schema's, walked in the same order.
func dictionaryTypes(schemaMeta []byte, schema *arrow.Schema) (map[int64]arrow.DataType, error) {
	b := arrowfb.Buf(schemaMeta)
	root, _ := b.Deref(0)
	msg, ok := b.Table(root)
	if !ok {
		return nil, errors.New("schema message out of bounds")
	}
	header, _, ok := msg.SubTable(8)
	if !ok {
		return nil, errors.New("schema out of bounds")
	}
	var ids []int64
	var walkFB func(t arrowfb.Table, vo, depth int) error
	walkFB = func(t arrowfb.Table, vo, depth int) error {
		start, n, ok := t.Vector(vo, 4)
		if !ok || depth > arrowfb.MaxFieldDepth {
			return errors.New("fields out of bounds")
		}
		for i := 0; i < n; i++ {
			fp, _ := b.Deref(start + 4*i)
			f, ok := b.Table(fp)
			if !ok {
				return errors.New("field out of bounds")
			}
			if d, present, ok := f.SubTable(12); ok && present {
				ids = append(ids, d.I64(4))
			}
			if err := walkFB(f, 14, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walkFB(header, 6, 0); err != nil {
		return nil, err
	}
	var types []arrow.DataType
	var walk func(t arrow.DataType)
	walk = func(t arrow.DataType) {
		if d, ok := t.(*arrow.DictionaryType); ok {
			types = append(types, d.ValueType)
			t = d.ValueType
		}
		if ext, ok := t.(arrow.ExtensionType); ok {
			t = ext.StorageType()
		}
		if nt, ok := t.(arrow.NestedType); ok {
			for _, c := range nt.Fields() {
				walk(c.Type)
			}
		}
	}
	for _, f := range schema.Fields() {
		walk(f.Type)
	}
	if len(ids) != len(types) {
		return nil, fmt.Errorf("%d dictionary ids for %d dictionary fields", len(ids), len(types))
	}
	m := make(map[int64]arrow.DataType, len(ids))
	for i, id := range ids {
		m[id] = types[i]
	}
	return m, nil
}
