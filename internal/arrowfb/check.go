package arrowfb

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Check verifies the parts of an IPC message's flatbuffer metadata
// that arrow-go trusts in ways no recover can undo, before arrow-go reads
// it. arrow-go does not verify flatbuffers: it sizes allocations by the
// vector lengths it finds (make([]arrow.Field, schema.FieldsLength()),
// children, key-value metadata, union type ids), so a length of 2^31 is a
// fatal "out of memory", and it follows child fields recursively, so a
// child offset pointing back at its parent is a fatal stack overflow.
// Everything else malformed makes arrow-go index out of range, a panic
// its readers recover into an error.
//
// It checks: every table's vtable lies in the buffer; every vector arrow-go
// allocates by fits in the buffer; fields nest at most MaxFieldDepth deep
// and the schema walk visits a bounded number of fields (shared subtrees
// would otherwise blow up exponentially). It also reports whether a
// record or dictionary batch is compressed: arrow-go sizes the
// decompressed buffer by an 8-byte length in the body (unbounded), and a
// compressed column cannot be shared anyway, so such batches are not
// handed to it.
func Check(meta []byte) (compressed bool, err error) {
	b := Buf(meta)
	root, ok := b.Deref(0)
	if !ok {
		return false, errors.New("root offset out of bounds")
	}
	msg, ok := b.Table(root)
	if !ok {
		return false, errors.New("message table out of bounds")
	}
	if err := b.keyValues(msg, 12); err != nil {
		return false, fmt.Errorf("message custom_metadata: %w", err)
	}
	header, present, ok := msg.SubTable(8)
	if !ok {
		return false, errors.New("message header out of bounds")
	}
	if !present {
		return false, nil
	}
	switch msg.U8(6) {
	case 1: // Schema
		w := &fieldWalk{budget: len(meta)/8 + 16}
		if err := b.keyValues(header, 8); err != nil {
			return false, fmt.Errorf("schema custom_metadata: %w", err)
		}
		if _, _, ok := header.Vector(10, 8); !ok {
			return false, errors.New("schema features out of bounds")
		}
		return false, w.fields(header, 6, 0)
	case 2: // DictionaryBatch
		data, present, ok := header.SubTable(6)
		if !ok {
			return false, errors.New("dictionary batch data out of bounds")
		}
		if !present {
			return false, nil
		}
		return b.recordBatch(data)
	case 3: // RecordBatch
		return b.recordBatch(header)
	}
	return false, nil
}

// MaxFieldDepth bounds the nesting of fields; Arrow C++'s IPC reader
// refuses more than 64 levels too.
const MaxFieldDepth = 64

type fieldWalk struct{ budget int }

// fields checks the vector of Field tables at vtable offset vo of t.
func (w *fieldWalk) fields(t Table, vo, depth int) error {
	start, n, ok := t.Vector(vo, 4)
	if !ok {
		return errors.New("fields vector out of bounds")
	}
	if n > 0 && depth >= MaxFieldDepth {
		return fmt.Errorf("fields nested more than %d deep", MaxFieldDepth)
	}
	b := t.b
	for i := 0; i < n; i++ {
		if w.budget--; w.budget < 0 {
			return errors.New("more fields than the metadata can hold")
		}
		fp, ok := b.Deref(start + 4*i)
		if !ok {
			return fmt.Errorf("field %d out of bounds", i)
		}
		f, ok := b.Table(fp)
		if !ok {
			return fmt.Errorf("field %d table out of bounds", i)
		}
		typ, _, ok := f.SubTable(10)
		if !ok {
			return fmt.Errorf("field %d type out of bounds", i)
		}
		if f.U8(8) == 14 { // Union: typeIds [int]
			if _, _, ok := typ.Vector(6, 4); !ok {
				return fmt.Errorf("field %d union type ids out of bounds", i)
			}
		}
		if dict, present, ok := f.SubTable(12); !ok {
			return fmt.Errorf("field %d dictionary out of bounds", i)
		} else if present {
			if _, _, ok := dict.SubTable(6); !ok {
				return fmt.Errorf("field %d dictionary index type out of bounds", i)
			}
		}
		if err := b.keyValues(f, 16); err != nil {
			return fmt.Errorf("field %d custom_metadata: %w", i, err)
		}
		if err := w.fields(f, 14, depth+1); err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
	}
	return nil
}

// recordBatch checks a RecordBatch table's vectors and reports whether it
// is compressed.
func (b Buf) recordBatch(rb Table) (bool, error) {
	if _, _, ok := rb.Vector(6, 16); !ok {
		return false, errors.New("record batch nodes out of bounds")
	}
	if _, _, ok := rb.Vector(8, 16); !ok {
		return false, errors.New("record batch buffers out of bounds")
	}
	if _, _, ok := rb.Vector(12, 8); !ok {
		return false, errors.New("record batch variadic buffer counts out of bounds")
	}
	_, compressed, ok := rb.SubTable(10)
	if !ok {
		return false, errors.New("record batch compression out of bounds")
	}
	return compressed, nil
}

// keyValues checks a [KeyValue] vector.
func (b Buf) keyValues(t Table, vo int) error {
	start, n, ok := t.Vector(vo, 4)
	if !ok {
		return errors.New("vector out of bounds")
	}
	for i := 0; i < n; i++ {
		p, ok := b.Deref(start + 4*i)
		if !ok {
			return fmt.Errorf("entry %d out of bounds", i)
		}
		if _, ok := b.Table(p); !ok {
			return fmt.Errorf("entry %d table out of bounds", i)
		}
	}
	return nil
}

// Buf is a flatbuffer read with every access bounds-checked.
type Buf []byte

// U32 reads the uint32 at p.
func (b Buf) U32(p int) (uint32, bool) {
	if p < 0 || p > len(b)-4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[p:]), true
}

// U16 reads the uint16 at p.
func (b Buf) U16(p int) (int, bool) {
	if p < 0 || p > len(b)-2 {
		return 0, false
	}
	return int(binary.LittleEndian.Uint16(b[p:])), true
}

// Deref follows the unsigned offset stored at p.
func (b Buf) Deref(p int) (int, bool) {
	off, ok := b.U32(p)
	if !ok {
		return 0, false
	}
	q := int64(p) + int64(off)
	if q >= int64(len(b)) {
		return 0, false
	}
	return int(q), true
}

// Table is a table at Pos whose vtable (at VT, VTLen bytes) lies in its
// buffer.
type Table struct {
	b              Buf
	Pos, VT, VTLen int
}

// Table is the table at pos, if its vtable lies in b.
func (b Buf) Table(pos int) (Table, bool) {
	so, ok := b.U32(pos)
	if !ok {
		return Table{}, false
	}
	vt := int64(pos) - int64(int32(so))
	if vt < 0 || vt > int64(len(b)) {
		return Table{}, false
	}
	vtl, ok := b.U16(int(vt))
	if !ok || vtl < 4 || vtl%2 != 0 || int(vt)+vtl > len(b) {
		return Table{}, false
	}
	tl, _ := b.U16(int(vt) + 2)
	if pos+tl > len(b) {
		return Table{}, false
	}
	return Table{b: b, Pos: pos, VT: int(vt), VTLen: vtl}, true
}

// Field returns the position of the field at vtable offset vo, 0 if absent.
func (t Table) Field(vo int) int {
	if vo+2 > t.VTLen {
		return 0
	}
	off, _ := t.b.U16(t.VT + vo)
	if off == 0 {
		return 0
	}
	return t.Pos + off
}

// U8 reads the byte field at vtable offset vo, 0 if absent.
func (t Table) U8(vo int) byte {
	p := t.Field(vo)
	if p == 0 || p >= len(t.b) {
		return 0
	}
	return t.b[p]
}

// I64 reads the int64 field at vtable offset vo, 0 if absent.
func (t Table) I64(vo int) int64 {
	p := t.Field(vo)
	if p == 0 || p > len(t.b)-8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:]))
}

// SubTable returns the table an offset field points to.
func (t Table) SubTable(vo int) (sub Table, present, ok bool) {
	p := t.Field(vo)
	if p == 0 {
		return Table{}, false, true
	}
	q, ok := t.b.Deref(p)
	if !ok {
		return Table{}, true, false
	}
	sub, ok = t.b.Table(q)
	return sub, true, ok
}

// Vector returns the start and length of a vector field of elements of
// size bytes, checking that it fits in the buffer.
func (t Table) Vector(vo, size int) (start, n int, ok bool) {
	p := t.Field(vo)
	if p == 0 {
		return 0, 0, true
	}
	q, ok := t.b.Deref(p)
	if !ok {
		return 0, 0, false
	}
	l, ok := t.b.U32(q)
	if !ok || int64(l)*int64(size) > int64(len(t.b)-q-4) {
		return 0, 0, false
	}
	return q + 4, int(l), true
}
