//go:build unix

package dlarrow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkMetadata verifies the parts of an IPC message's flatbuffer metadata
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
// allocates by fits in the buffer; fields nest at most maxFieldDepth deep
// and the schema walk visits a bounded number of fields (shared subtrees
// would otherwise blow up exponentially). It also reports whether a
// record or dictionary batch is compressed: arrow-go sizes the
// decompressed buffer by an 8-byte length in the body (unbounded), and a
// compressed column cannot be shared anyway, so such batches are not
// handed to it.
func checkMetadata(meta []byte) (compressed bool, err error) {
	b := fbuf(meta)
	root, ok := b.deref(0)
	if !ok {
		return false, errors.New("root offset out of bounds")
	}
	msg, ok := b.table(root)
	if !ok {
		return false, errors.New("message table out of bounds")
	}
	if err := b.keyValues(msg, 12); err != nil {
		return false, fmt.Errorf("message custom_metadata: %w", err)
	}
	header, present, ok := msg.subTable(8)
	if !ok {
		return false, errors.New("message header out of bounds")
	}
	if !present {
		return false, nil
	}
	switch msg.u8(6) {
	case 1: // Schema
		w := &fieldWalk{budget: len(meta)/8 + 16}
		if err := b.keyValues(header, 8); err != nil {
			return false, fmt.Errorf("schema custom_metadata: %w", err)
		}
		if _, _, ok := header.vector(10, 8); !ok {
			return false, errors.New("schema features out of bounds")
		}
		return false, w.fields(header, 6, 0)
	case 2: // DictionaryBatch
		data, present, ok := header.subTable(6)
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

// maxFieldDepth bounds the nesting of fields; Arrow C++'s IPC reader
// refuses more than 64 levels too.
const maxFieldDepth = 64

type fieldWalk struct{ budget int }

// fields checks the vector of Field tables at vtable offset vo of t.
func (w *fieldWalk) fields(t fbtable, vo, depth int) error {
	start, n, ok := t.vector(vo, 4)
	if !ok {
		return errors.New("fields vector out of bounds")
	}
	if n > 0 && depth >= maxFieldDepth {
		return fmt.Errorf("fields nested more than %d deep", maxFieldDepth)
	}
	b := t.b
	for i := 0; i < n; i++ {
		if w.budget--; w.budget < 0 {
			return errors.New("more fields than the metadata can hold")
		}
		fp, ok := b.deref(start + 4*i)
		if !ok {
			return fmt.Errorf("field %d out of bounds", i)
		}
		f, ok := b.table(fp)
		if !ok {
			return fmt.Errorf("field %d table out of bounds", i)
		}
		typ, _, ok := f.subTable(10)
		if !ok {
			return fmt.Errorf("field %d type out of bounds", i)
		}
		if f.u8(8) == 14 { // Union: typeIds [int]
			if _, _, ok := typ.vector(6, 4); !ok {
				return fmt.Errorf("field %d union type ids out of bounds", i)
			}
		}
		if dict, present, ok := f.subTable(12); !ok {
			return fmt.Errorf("field %d dictionary out of bounds", i)
		} else if present {
			if _, _, ok := dict.subTable(6); !ok {
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
func (b fbuf) recordBatch(rb fbtable) (bool, error) {
	if _, _, ok := rb.vector(6, 16); !ok {
		return false, errors.New("record batch nodes out of bounds")
	}
	if _, _, ok := rb.vector(8, 16); !ok {
		return false, errors.New("record batch buffers out of bounds")
	}
	if _, _, ok := rb.vector(12, 8); !ok {
		return false, errors.New("record batch variadic buffer counts out of bounds")
	}
	_, compressed, ok := rb.subTable(10)
	if !ok {
		return false, errors.New("record batch compression out of bounds")
	}
	return compressed, nil
}

// keyValues checks a [KeyValue] vector.
func (b fbuf) keyValues(t fbtable, vo int) error {
	start, n, ok := t.vector(vo, 4)
	if !ok {
		return errors.New("vector out of bounds")
	}
	for i := 0; i < n; i++ {
		p, ok := b.deref(start + 4*i)
		if !ok {
			return fmt.Errorf("entry %d out of bounds", i)
		}
		if _, ok := b.table(p); !ok {
			return fmt.Errorf("entry %d table out of bounds", i)
		}
	}
	return nil
}

// fbuf is a flatbuffer read with every access bounds-checked.
type fbuf []byte

func (b fbuf) u32(p int) (uint32, bool) {
	if p < 0 || p > len(b)-4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[p:]), true
}

func (b fbuf) u16(p int) (int, bool) {
	if p < 0 || p > len(b)-2 {
		return 0, false
	}
	return int(binary.LittleEndian.Uint16(b[p:])), true
}

// deref follows the unsigned offset stored at p.
func (b fbuf) deref(p int) (int, bool) {
	off, ok := b.u32(p)
	if !ok {
		return 0, false
	}
	q := int64(p) + int64(off)
	if q >= int64(len(b)) {
		return 0, false
	}
	return int(q), true
}

// fbtable is a table at pos whose vtable (at vt, vtlen bytes) lies in b.
type fbtable struct {
	b            fbuf
	pos, vt, vtl int
}

func (b fbuf) table(pos int) (fbtable, bool) {
	so, ok := b.u32(pos)
	if !ok {
		return fbtable{}, false
	}
	vt := int64(pos) - int64(int32(so))
	if vt < 0 || vt > int64(len(b)) {
		return fbtable{}, false
	}
	vtl, ok := b.u16(int(vt))
	if !ok || vtl < 4 || vtl%2 != 0 || int(vt)+vtl > len(b) {
		return fbtable{}, false
	}
	tl, _ := b.u16(int(vt) + 2)
	if pos+tl > len(b) {
		return fbtable{}, false
	}
	return fbtable{b: b, pos: pos, vt: int(vt), vtl: vtl}, true
}

// field returns the position of the field at vtable offset vo, 0 if absent.
func (t fbtable) field(vo int) int {
	if vo+2 > t.vtl {
		return 0
	}
	off, _ := t.b.u16(t.vt + vo)
	if off == 0 {
		return 0
	}
	return t.pos + off
}

func (t fbtable) u8(vo int) byte {
	p := t.field(vo)
	if p == 0 || p >= len(t.b) {
		return 0
	}
	return t.b[p]
}

// i64 reads the int64 field at vtable offset vo, 0 if absent.
func (t fbtable) i64(vo int) int64 {
	p := t.field(vo)
	if p == 0 || p > len(t.b)-8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:]))
}

// subTable returns the table an offset field points to.
func (t fbtable) subTable(vo int) (sub fbtable, present, ok bool) {
	p := t.field(vo)
	if p == 0 {
		return fbtable{}, false, true
	}
	q, ok := t.b.deref(p)
	if !ok {
		return fbtable{}, true, false
	}
	sub, ok = t.b.table(q)
	return sub, true, ok
}

// vector returns the start and length of a vector field of elements of
// size bytes, checking that it fits in the buffer.
func (t fbtable) vector(vo, size int) (start, n int, ok bool) {
	p := t.field(vo)
	if p == 0 {
		return 0, 0, true
	}
	q, ok := t.b.deref(p)
	if !ok {
		return 0, 0, false
	}
	l, ok := t.b.u32(q)
	if !ok || int64(l)*int64(size) > int64(len(t.b)-q-4) {
		return 0, 0, false
	}
	return q + 4, int(l), true
}
