//go:build unix

package dlarrow

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/arrowfb"
)

// checkFooter cross-checks the file's footer against the messages that
// scan found in the stream. An Arrow IPC file says everything twice: the
// stream (schema, dictionary and record batch messages) and the footer (a
// copy of the schema and a Block per dictionary and record batch: offset,
// metadata length, body length). Arrow's file readers, pyarrow's
// included, read the footer and follow its Blocks; this package walks the
// stream. A file whose two halves disagree would read differently here and
// there, so any disagreement is an ErrFormat naming both values: the
// schemas must be equal (fields, types, nullability, metadata), and the
// Blocks must list exactly the stream's dictionary and record batch
// messages, in order, with their offsets, metadata lengths (framing
// included) and body lengths.
func (f *File) checkFooter() error {
	if err := arrowfb.Verify(f.footer, arrowfb.Footer); err != nil {
		return footerErr("footer", len(f.footer), "invalid flatbuffer: "+err.Error())
	}
	b := arrowfb.Buf(f.footer)
	root, ok := b.Deref(0)
	if !ok {
		return footerErr("footer", len(f.footer), "root offset out of bounds")
	}
	ft, ok := b.Table(root)
	if !ok {
		return footerErr("footer", len(f.footer), "footer table out of bounds")
	}
	sch, present, ok := ft.SubTable(6)
	if !ok || !present {
		return footerErr("footer.schema", "missing", "the footer holds no schema")
	}
	schema, err := f.footerSchema(sch.Pos)
	if err != nil {
		return err
	}
	if err := schemasAgree(schema, f.schema); err != nil {
		return err
	}
	dicts, err := blocks(b, ft, 8)
	if err != nil {
		return footerErr("footer.dictionaries", "vector", err.Error())
	}
	if err := blocksAgree("dictionaries", dicts, f.dicts); err != nil {
		return err
	}
	batches, err := blocks(b, ft, 10)
	if err != nil {
		return footerErr("footer.recordBatches", "vector", err.Error())
	}
	msgs := make([]message, len(f.batches))
	for i := range f.batches {
		msgs[i] = f.batches[i].msg
	}
	return blocksAgree("recordBatches", batches, msgs)
}

// block is an Arrow IPC footer Block.
type block struct{ offset, metaLen, bodyLen int64 }

// blocks reads the vector of Block structs (24 bytes each: int64 offset,
// int32 metaDataLength, 4 bytes of padding, int64 bodyLength) at vtable
// offset vo of t.
func blocks(b arrowfb.Buf, t arrowfb.Table, vo int) ([]block, error) {
	start, n, ok := t.Vector(vo, 24)
	if !ok {
		return nil, fmt.Errorf("out of bounds")
	}
	bs := make([]block, n)
	for i := range bs {
		p := b[start+24*i:]
		bs[i] = block{int64(binary.LittleEndian.Uint64(p)), int64(int32(binary.LittleEndian.Uint32(p[8:]))),
			int64(binary.LittleEndian.Uint64(p[16:]))}
	}
	return bs, nil
}

// blocksAgree checks that the footer's Blocks describe msgs, the stream's
// messages of that kind.
func blocksAgree(kind string, bs []block, msgs []message) error {
	if len(bs) != len(msgs) {
		return &dlpack.FieldError{Field: "footer." + kind, Value: len(bs), Err: ErrFormat,
			Why: fmt.Sprintf("the footer lists %d, the stream holds %d", len(bs), len(msgs))}
	}
	for i, b := range bs {
		m := msgs[i]
		for _, c := range []struct {
			name         string
			footer, strm int64
		}{{"offset", b.offset, m.offset}, {"metaDataLength", b.metaLen, m.metaSpan}, {"bodyLength", b.bodyLen, int64(len(m.body))}} {
			if c.footer != c.strm {
				return &dlpack.FieldError{Field: fmt.Sprintf("footer.%s[%d].%s", kind, i, c.name), Value: c.footer, Err: ErrFormat,
					Why: fmt.Sprintf("the footer says %d, the stream's message says %d", c.footer, c.strm)}
			}
		}
	}
	return nil
}

// footerSchema reads the footer's Schema table (at pos in the footer)
// through arrow-go, which reads schemas only from messages: it wraps the
// table in a Message flatbuffer of its own, placed before a copy of the
// footer (flatbuffer offsets are relative, so the copy reads as the
// original) and checked by checkMetadata as any message is.
func (f *File) footerSchema(pos int) (*arrow.Schema, error) {
	// root offset (4) | vtable (10, padded to 12) | table (12) | footer
	const vt, tbl, body = 4, 16, 28
	meta := make([]byte, body+len(f.footer))
	le := binary.LittleEndian
	le.PutUint32(meta[0:], tbl)
	for i, v := range []uint16{10, 12, 4, 6, 8} { // vtable: its length, the table's, version, header_type, header
		le.PutUint16(meta[vt+2*i:], v)
	}
	le.PutUint32(meta[tbl:], uint32(tbl-vt))
	le.PutUint16(meta[tbl+4:], uint16(f.schemaVersion()))
	meta[tbl+6] = 1 // MessageHeader Schema
	le.PutUint32(meta[tbl+8:], uint32(body+pos-(tbl+8)))
	copy(meta[body:], f.footer)
	msg := message{meta: meta}
	if _, err := arrowfb.Check(meta); err != nil {
		return nil, footerErr("footer.schema", "table", "malformed: "+err.Error())
	}
	r, err := readerOf([]message{msg})
	if err != nil {
		return nil, arrowErr("footer.schema", "table", err)
	}
	defer r.Release()
	return r.Schema(), nil
}

// schemaVersion is the metadata version of the stream's schema message,
// which the footer's schema is read with.
func (f *File) schemaVersion() int16 {
	b := arrowfb.Buf(f.schemaM.meta)
	root, _ := b.Deref(0)
	msg, ok := b.Table(root)
	if !ok {
		return 0
	}
	p := msg.Field(4)
	if p == 0 {
		return 0
	}
	v, _ := b.U16(p)
	return int16(v)
}

// schemasAgree reports the first difference between the footer's schema
// and the stream's, naming both values.
func schemasAgree(footer, stream *arrow.Schema) error {
	if footer.NumFields() != stream.NumFields() {
		return &dlpack.FieldError{Field: "footer.schema.fields", Value: footer.NumFields(), Err: ErrFormat,
			Why: fmt.Sprintf("the footer's schema has %d fields, the stream's %d", footer.NumFields(), stream.NumFields())}
	}
	for i, ff := range footer.Fields() {
		if sf := stream.Field(i); !ff.Equal(sf) {
			return &dlpack.FieldError{Field: fmt.Sprintf("footer.schema.fields[%d]", i), Value: fieldString(ff), Err: ErrFormat,
				Why: fmt.Sprintf("the footer's schema says %s, the stream's %s", fieldString(ff), fieldString(sf))}
		}
	}
	if !footer.Metadata().Equal(stream.Metadata()) || footer.Endianness() != stream.Endianness() {
		return &dlpack.FieldError{Field: "footer.schema.metadata", Value: footer.Metadata().String(), Err: ErrFormat,
			Why: fmt.Sprintf("the footer's schema has metadata %s (%s endian), the stream's %s (%s endian)",
				footer.Metadata(), footer.Endianness(), stream.Metadata(), stream.Endianness())}
	}
	return nil
}

// fieldString spells a field with its nullability and metadata, which
// arrow.Field's String leaves out.
func fieldString(f arrow.Field) string {
	s := fmt.Sprintf("%q: %s", f.Name, f.Type)
	if f.Nullable {
		s += " nullable"
	}
	if f.Metadata.Len() > 0 {
		s += " " + f.Metadata.String()
	}
	return s
}

func footerErr(field string, value any, why string) error {
	return &dlpack.FieldError{Field: field, Value: value, Err: ErrFormat, Why: why}
}
