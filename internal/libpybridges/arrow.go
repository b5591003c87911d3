package main

// The Arrow arrays of package dlarrow: pyarrow arrays arrive through the
// Arrow C Data Interface (arrow/cdata) and leave as DLPack capsules;
// DLPack capsules arrive and leave as Arrow C arrays
// (dlarrow/python/godlarrow.py; the tests compare them with pyarrow).

// #include <stdint.h>
import "C"

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/pycapsule"
)

// object is what Python refers to by id: an Arrow array (exported afresh
// on each request) or a Tensor (a file column).
type object struct {
	field  arrow.Field
	arr    arrow.Array
	tensor *dlarrow.Tensor
	file   *dlarrow.File
}

// Release releases what o holds (pybridges_free); exports keep their
// own references.
func (o *object) Release() {
	switch {
	case o.arr != nil:
		o.arr.Release()
	case o.tensor != nil:
		o.tensor.Close()
	case o.file != nil:
		o.file.Close()
	}
}

// objectOf returns the object of id, nil if there is none.
func objectOf(id C.int64_t) *object {
	o, _ := lookup[*object](id)
	return o
}

// dlarrow_import_c takes a pyarrow array exported with
// Array._export_to_c(array, schema) and returns its id, or -1 with a
// ValueError set (the C array is then released).
//
//export dlarrow_import_c
func dlarrow_import_c(arr, schema C.uintptr_t) C.int64_t {
	carr := cdata.ArrayFromPtr(uintptr(arr))
	field, a, err := cdata.ImportCArray(carr, cdata.SchemaFromPtr(uintptr(schema)))
	if err != nil {
		cdata.ReleaseCArrowArray(carr)
		pycapsule.SetError(false, err.Error())
		return -1
	}
	return register(&object{field: field, arr: a})
}

// dlarrow_arange returns the id of a Go-built float64 array 0, 1, ..., n-1
// (Go allocator: Go heap memory).
//
//export dlarrow_arange
func dlarrow_arange(n C.int64_t) C.int64_t {
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range int64(n) {
		b.Append(float64(i))
	}
	return register(&object{arr: b.NewArray()})
}

// dlarrow_open_file maps an Arrow IPC file; returns its id or -1 with a
// ValueError set.
//
//export dlarrow_open_file
func dlarrow_open_file(path *C.char) C.int64_t {
	f, err := dlarrow.OpenFile(C.GoString(path))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	return register(&object{file: f})
}

// dlarrow_file_column returns the id of a column of an open file (a
// Tensor pointing into the mapping), or -1 with a BufferError set.
//
//export dlarrow_file_column
func dlarrow_file_column(file C.int64_t, batch, col C.int) C.int64_t {
	o := objectOf(file)
	if o == nil || o.file == nil {
		pycapsule.SetError(false, "dlarrow: no such file")
		return -1
	}
	t, err := o.file.Column(int(batch), int(col))
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return -1
	}
	return register(&object{tensor: t})
}

// dlarrow_dlpack answers __dlpack__ for an id: the four arguments are the
// Python objects __dlpack__ received (borrowed), read by pycapsule.DLPack
// as the array API rules. It returns a new capsule reference, or 0 with
// the exception set.
//
//export dlarrow_dlpack
func dlarrow_dlpack(id C.int64_t, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	o := objectOf(id)
	if o == nil || o.file != nil {
		pycapsule.SetError(true, "dlarrow: no such array")
		return 0
	}
	t := o.tensor
	if t == nil {
		var err error
		if t, err = dlarrow.FromField(o.field, o.arr); err != nil {
			pycapsule.Raise(err)
			return 0
		}
		defer t.Close()
	}
	return C.uintptr_t(pycapsule.DLPack(t, uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// dlarrow_unit writes the temporal unit of an id's tensor ("" for numbers
// and for arrays Go refuses) into buf (NUL-terminated, at most n bytes).
//
//export dlarrow_unit
func dlarrow_unit(id C.int64_t, buf *C.char, n C.int) {
	unit := ""
	if o := objectOf(id); o != nil && o.arr != nil {
		if t, err := dlarrow.FromField(o.field, o.arr); err == nil {
			unit = t.Unit()
			t.Close()
		}
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	out[copy(out[:len(out)-1], unit)] = 0
}

// dlarrow_to_arrow consumes a DLPack capsule (borrowed reference), wraps
// its tensor as an Arrow array sharing its memory (copying only with
// copy != 0), and exports that through the C Data Interface into the
// zeroed structs at arr and schema. Returns 0, or -1 with an exception
// set (ValueError for a used capsule, BufferError for a refused tensor).
//
//export dlarrow_to_arrow
func dlarrow_to_arrow(capsule, arr, schema C.uintptr_t, copyMode C.int) C.int {
	m, versioned, err := pycapsule.Consume(uintptr(capsule))
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	var f dlpack.Foreign
	if versioned {
		f, err = dlpack.Import(m)
	} else {
		f, err = dlpack.ImportLegacy(m)
	}
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return -1
	}
	var a arrow.Array
	if copyMode != 0 {
		a, err = dlarrow.CopyToArray(f, memory.DefaultAllocator)
		f.Close()
	} else if a, err = dlarrow.ToArray(f); err != nil {
		f.Close()
	}
	if err != nil {
		pycapsule.SetError(true, err.Error())
		return -1
	}
	defer a.Release() // the C array holds its own reference
	cdata.ExportArrowArray(a, cdata.ArrayFromPtr(uintptr(arr)), cdata.SchemaFromPtr(uintptr(schema)))
	return 0
}
