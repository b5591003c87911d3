package arrowfb

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The flatbuffers verifier of Arrow's IPC metadata. Arrow's readers
// (Arrow C++, so pyarrow) run the flatbuffers verifier over every
// message's metadata and over the footer before reading them, and refuse
// what it refuses ("Invalid flatbuffers message", "Verification of
// flatbuffer-encoded Footer failed"): a field not aligned to its size, an
// offset out of the buffer, a vtable of odd size, a string without its
// terminating zero, more than 128 nested tables. A file such a reader
// refuses must not read here, so verify applies the same rules (those of
// flatbuffers' Verifier, with Arrow's limits: depth 128, 8 tables per
// byte), driven by the tables of Arrow's Schema.fbs, Message.fbs and
// File.fbs below. Check then checks what arrow-go needs beyond
// that.

// fbKind is the kind of a table field.
type fbKind uint8

const (
	fbScalar fbKind = iota // size bytes, aligned to size
	fbTable                // an offset to a table
	fbString               // an offset to a string
	fbVector               // an offset to a vector of size-byte scalars or structs
	fbTables               // an offset to a vector of tables
	fbUnion                // an offset to a table whose type is given by the union type field before it
)

type fbField struct {
	slot  int // the field's index: vtable offset 4 + 2*slot
	kind  fbKind
	size  int
	table *TableDef
	union []*TableDef // by union type; nil entries (and types past the end) are not verified
}

// TableDef describes a flatbuffers table of Arrow's schemas, for Verify.
type TableDef struct {
	name   string
	fields []fbField
}

func scalar(slot, size int) fbField      { return fbField{slot: slot, kind: fbScalar, size: size} }
func str(slot int) fbField               { return fbField{slot: slot, kind: fbString} }
func vec(slot, size int) fbField         { return fbField{slot: slot, kind: fbVector, size: size} }
func tbl(slot int, t *TableDef) fbField  { return fbField{slot: slot, kind: fbTable, table: t} }
func tbls(slot int, t *TableDef) fbField { return fbField{slot: slot, kind: fbTables, table: t} }

var (
	fbEmpty    = &TableDef{name: "(empty type)"}
	fbKeyValue = &TableDef{name: "KeyValue", fields: []fbField{str(0), str(1)}}
	fbInt      = &TableDef{name: "Int", fields: []fbField{scalar(0, 4), scalar(1, 1)}}
	fbDictEnc  = &TableDef{name: "DictionaryEncoding", fields: []fbField{scalar(0, 8), tbl(1, fbInt), scalar(2, 1), scalar(3, 2)}}
	// Type, by union type: Null, Int, FloatingPoint, Binary, Utf8, Bool,
	// Decimal, Date, Time, Timestamp, Interval, List, Struct_, Union,
	// FixedSizeBinary, FixedSizeList, Map, Duration, LargeBinary,
	// LargeUtf8, LargeList, RunEndEncoded, BinaryView, Utf8View,
	// ListView, LargeListView
	fbTypes = []*TableDef{nil,
		fbEmpty, fbInt,
		{name: "FloatingPoint", fields: []fbField{scalar(0, 2)}},
		fbEmpty, fbEmpty, fbEmpty,
		{name: "Decimal", fields: []fbField{scalar(0, 4), scalar(1, 4), scalar(2, 4)}},
		{name: "Date", fields: []fbField{scalar(0, 2)}},
		{name: "Time", fields: []fbField{scalar(0, 2), scalar(1, 4)}},
		{name: "Timestamp", fields: []fbField{scalar(0, 2), str(1)}},
		{name: "Interval", fields: []fbField{scalar(0, 2)}},
		fbEmpty, fbEmpty,
		{name: "Union", fields: []fbField{scalar(0, 2), vec(1, 4)}},
		{name: "FixedSizeBinary", fields: []fbField{scalar(0, 4)}},
		{name: "FixedSizeList", fields: []fbField{scalar(0, 4)}},
		{name: "Map", fields: []fbField{scalar(0, 1)}},
		{name: "Duration", fields: []fbField{scalar(0, 2)}},
		fbEmpty, fbEmpty, fbEmpty, fbEmpty, fbEmpty, fbEmpty, fbEmpty, fbEmpty,
	}
	fbFieldTable = &TableDef{name: "Field"}
	fbSchema     = &TableDef{name: "Schema", fields: []fbField{scalar(0, 2), tbls(1, fbFieldTable), tbls(2, fbKeyValue), vec(3, 8)}}
	fbBatch      = &TableDef{name: "RecordBatch", fields: []fbField{scalar(0, 8), vec(1, 16), vec(2, 16),
		tbl(3, &TableDef{name: "BodyCompression", fields: []fbField{scalar(0, 1), scalar(1, 1)}}), vec(4, 8)}}
	fbDictBatch = &TableDef{name: "DictionaryBatch", fields: []fbField{scalar(0, 8), tbl(1, fbBatch), scalar(2, 1)}}
	// Message is an IPC message: a header of type Schema,
	// DictionaryBatch or RecordBatch (Tensor and SparseTensor messages
	// are refused by their readers).
	Message = &TableDef{name: "Message", fields: []fbField{scalar(0, 2), scalar(1, 1),
		{slot: 2, kind: fbUnion, union: []*TableDef{nil, fbSchema, fbDictBatch, fbBatch}}, scalar(3, 8), tbls(4, fbKeyValue)}}
	// Footer is the footer of an IPC file.
	Footer = &TableDef{name: "Footer", fields: []fbField{scalar(0, 2), tbl(1, fbSchema), vec(2, 24), vec(3, 24), tbls(4, fbKeyValue)}}
)

func init() {
	fbFieldTable.fields = []fbField{str(0), scalar(1, 1), scalar(2, 1), {slot: 3, kind: fbUnion, union: fbTypes},
		tbl(4, fbDictEnc), tbls(5, fbFieldTable), tbls(6, fbKeyValue)}
}

// fbVerifier holds the state of one verification.
type fbVerifier struct {
	b             []byte
	depth, tables int
	maxTables     int
}

// Verify checks buf as a flatbuffer whose root is a def table.
func Verify(buf []byte, def *TableDef) error {
	const minSize = 12 // flatbuffers' FLATBUFFERS_MIN_BUFFER_SIZE
	if len(buf) < minSize || len(buf) >= 1<<31-1 {
		return fmt.Errorf("%s flatbuffer of %d bytes", def.name, len(buf))
	}
	v := &fbVerifier{b: buf, maxTables: 8 * len(buf)}
	root, err := v.offset(0)
	if err != nil {
		return fmt.Errorf("%s: root: %w", def.name, err)
	}
	return v.table(root, def)
}

// in reports whether [p, p+n) lies in the buffer (flatbuffers' Verify).
func (v *fbVerifier) in(p, n int) bool { return n < len(v.b) && p >= 0 && p <= len(v.b)-n }

// scalarAt checks a scalar of size bytes at p: aligned and in the buffer.
func (v *fbVerifier) scalarAt(p, size int) bool { return p%size == 0 && v.in(p, size) }

// offset checks the uoffset at p and returns where it points.
func (v *fbVerifier) offset(p int) (int, error) {
	if !v.scalarAt(p, 4) {
		return 0, fmt.Errorf("offset at %d out of bounds or misaligned", p)
	}
	o := binary.LittleEndian.Uint32(v.b[p:])
	if o == 0 || int32(o) < 0 || !v.in(p+int(o), 1) {
		return 0, fmt.Errorf("offset %d at %d points outside the buffer", o, p)
	}
	return p + int(o), nil
}

// vector checks the vector at p of n elements of size bytes.
func (v *fbVerifier) Vector(p, size int) (n int, err error) {
	if !v.scalarAt(p, 4) {
		return 0, fmt.Errorf("vector at %d out of bounds or misaligned", p)
	}
	l := int64(binary.LittleEndian.Uint32(v.b[p:]))
	if l >= (1<<31-1)/int64(size) || !v.in(p, 4+int(l)*size) {
		return 0, fmt.Errorf("vector of %d elements at %d overruns the buffer", l, p)
	}
	return int(l), nil
}

func (v *fbVerifier) table(p int, def *TableDef) error {
	if !v.scalarAt(p, 4) {
		return fmt.Errorf("%s table at %d out of bounds or misaligned", def.name, p)
	}
	vt := p - int(int32(binary.LittleEndian.Uint32(v.b[p:])))
	v.depth++
	v.tables++
	defer func() { v.depth-- }()
	if v.depth > 128 || v.tables > v.maxTables {
		return fmt.Errorf("%s: more than 128 nested tables or %d tables", def.name, v.maxTables)
	}
	if !v.scalarAt(vt, 2) {
		return fmt.Errorf("%s vtable at %d out of bounds or misaligned", def.name, vt)
	}
	vsize := int(binary.LittleEndian.Uint16(v.b[vt:]))
	if vsize%2 != 0 || !v.in(vt, vsize) {
		return fmt.Errorf("%s vtable of %d bytes at %d", def.name, vsize, vt)
	}
	at := func(slot int) int { // the field's position, or -1 if absent
		vo := 4 + 2*slot
		if vo >= vsize {
			return -1
		}
		if o := int(binary.LittleEndian.Uint16(v.b[vt+vo:])); o != 0 {
			return p + o
		}
		return -1
	}
	for _, f := range def.fields {
		fp := at(f.slot)
		if fp < 0 {
			continue
		}
		if f.kind == fbScalar {
			if !v.scalarAt(fp, f.size) {
				return fmt.Errorf("%s field %d at %d out of bounds or misaligned", def.name, f.slot, fp)
			}
			continue
		}
		q, err := v.offset(fp)
		if err != nil {
			return fmt.Errorf("%s field %d: %w", def.name, f.slot, err)
		}
		switch f.kind {
		case fbTable:
			err = v.table(q, f.table)
		case fbString:
			var n int
			if n, err = v.Vector(q, 1); err == nil && (!v.in(q+4+n, 1) || v.b[q+4+n] != 0) {
				err = errors.New("string without its terminating zero")
			}
		case fbVector:
			_, err = v.Vector(q, f.size)
		case fbTables:
			var n int
			if n, err = v.Vector(q, 4); err == nil {
				for i := 0; i < n && err == nil; i++ {
					var e int
					if e, err = v.offset(q + 4 + 4*i); err == nil {
						err = v.table(e, f.table)
					}
				}
			}
		case fbUnion:
			// the union's type is the byte field in the slot before it
			tp := at(f.slot - 1)
			if tp < 0 {
				break // type NONE: the value is not verified (flatbuffers does the same)
			}
			if typ := int(v.b[tp]); typ < len(f.union) && f.union[typ] != nil {
				err = v.table(q, f.union[typ])
			}
		}
		if err != nil {
			return fmt.Errorf("%s field %d: %w", def.name, f.slot, err)
		}
	}
	return nil
}
