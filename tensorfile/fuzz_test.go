package tensorfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/godlpack/dlpack"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// FuzzNPYHeader: the .npy header parser never panics or reads past its
// input, and every header it accepts describes a layout that fits in
// int64, and survives a round trip through the writer's preamble.
func FuzzNPYHeader(f *testing.F) {
	for _, s := range []string{
		"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }",
		"{'descr': '|b1', 'fortran_order': True, 'shape': (), }",
		"{'shape': (0,), 'descr': '>c16', 'fortran_order': False}",
		"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
		"{'descr': '<f2', 'fortran_order': False, 'shape': (99999999999, 99999999999), }",
	} {
		f.Add(npyPreamble("<f8", false, []int64{1})[:10:10])
		b := []byte("\x93NUMPY\x01\x00\x00\x00")
		binary.LittleEndian.PutUint16(b[8:], uint16(len(s)))
		f.Add(append(b, s...))
		b3 := []byte("\x93NUMPY\x03\x00\x00\x00\x00\x00")
		binary.LittleEndian.PutUint32(b3[8:], uint32(len(s)))
		f.Add(append(b3, s...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseNPYHeader(b, int64(len(b)))
		if err != nil {
			return
		}
		if h.dataOffset > int64(len(b)) || h.nbytes < 0 || len(h.strides) != len(h.shape) {
			t.Fatalf("accepted an impossible header: %+v", h)
		}
		descr := h.descr
		if descr[0] == '=' {
			return // the writer never writes '='
		}
		pre := npyPreamble(descr, h.fortran, h.shape)
		h2, err := parseNPYHeader(pre, int64(len(pre)))
		if err != nil {
			t.Fatalf("the writer's header for %+v does not parse: %v", h, err)
		}
		if h2.dtype != h.dtype || h2.fortran != h.fortran || !slices.Equal(h2.shape, h.shape) || h2.bigEndian != h.bigEndian {
			t.Fatalf("round trip changed %+v into %+v", h, h2)
		}
	})
}

// FuzzSafetensorsHeader: the safetensors parser never panics, and every
// file it accepts has tensors that tile its data section exactly, each of
// shape x item size bytes.
func FuzzSafetensorsHeader(f *testing.F) {
	for _, s := range []string{
		`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`,
		`{"__metadata__":{"k":"v"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`,
		`{"a":{"dtype":"F8_E4M3","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`,
		`{"a\u00e9\ud83d\ude00x":{"dtype":"U8","shape":[12],"data_offsets":[0,12],"x":{"y":[1,-2.5e3,true,null,"\n"]}},"__metadata__":{"k\t":"v\"\\\/"}}`,
	} {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
		f.Add(append(append(b, s...), make([]byte, 12)...))
	}
	for _, s := range []string{`{}`, `{}  `, `{"__metadata__":{}}`} { // no tensors, no data
		f.Add(append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseSafetensors(b, int64(len(b)))
		ref, refErr := refParseSafetensors(b, int64(len(b)))
		if err != nil {
			return
		}
		// Whatever the scanner accepts, encoding/json accepts the same.
		if refErr != nil {
			t.Fatalf("accepted what encoding/json refuses (%v)", refErr)
		}
		// An empty list or map is the same header however it was made.
		for _, x := range []*stHeader{h, ref} {
			if len(x.entries) == 0 {
				x.entries = nil
			}
			if len(x.meta) == 0 {
				x.meta = nil
			}
		}
		if !reflect.DeepEqual(h, ref) {
			t.Fatalf("the scanner read %+v, encoding/json %+v", h, ref)
		}
		at := h.dataBase
		for _, e := range h.entries {
			n, _, err := layout("shape", e.shape, e.dtype.ItemSize(), false)
			if err != nil || h.dataBase+e.begin != at || e.end-e.begin != n {
				t.Fatalf("accepted %+v at %d (err %v)", e, at, err)
			}
			at = h.dataBase + e.end
		}
		if at != int64(len(b)) {
			t.Fatalf("tensors end at %d of %d bytes", at, len(b))
		}
	})
}

// refParseSafetensors is parseSafetensors on encoding/json, the reference
// the fuzz target holds the scanner to.
func refParseSafetensors(b []byte, size int64) (*stHeader, error) {
	hdr, err := safetensorsJSON(b, size)
	if err != nil {
		return nil, err
	}
	h := &stHeader{dataBase: 8 + int64(len(hdr))}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	jsonErr := func(err error) error {
		return fieldErr(ErrFormat, "header", "invalid JSON", fmt.Sprintf("at byte %d: %v", dec.InputOffset(), err))
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		name := tok.(string) // object keys are strings
		if seen[name] {
			return nil, fieldErr(ErrFormat, "header", name, "the name appears twice")
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&h.meta); err != nil {
				return nil, fieldErr(ErrFormat, "__metadata__", "invalid", "must be an object of strings: "+jsonWhy(err))
			}
			continue
		}
		var info struct {
			DType       *string       `json:"dtype"`
			Shape       []uint64      `json:"shape"`
			DataOffsets []json.Number `json:"data_offsets"`
		}
		if err := dec.Decode(&info); err != nil {
			return nil, fieldErr(ErrFormat, strconv.Quote(name), "invalid", "must be {\"dtype\", \"shape\", \"data_offsets\"}: "+jsonWhy(err))
		}
		var offs []uint64
		for _, o := range info.DataOffsets {
			v, err := strconv.ParseInt(string(o), 10, 64)
			if err != nil || v < 0 {
				return nil, fieldErr(ErrTruncated, strconv.Quote(name)+".data_offsets", info.DataOffsets, "offsets must be non-negative integers inside the file")
			}
			offs = append(offs, uint64(v))
		}
		if info.DataOffsets == nil {
			offs = nil
		}
		e, err := checkEntry(name, info.DType, info.Shape, offs)
		if err != nil {
			return nil, err
		}
		h.entries = append(h.entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	if rest := bytes.TrimLeft(hdr[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(rest), " "), 40)), "text after the JSON object")
	}
	return h, h.checkOffsets(size - h.dataBase)
}

// jsonWhy says what was wrong with a JSON value without Go type names.
func jsonWhy(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%q is a JSON %s", te.Field, te.Value)
		}
		return "a JSON " + te.Value
	}
	return err.Error()
}

// FuzzNPZ: opening an archive (archive/zip, then each member's .npy
// header) never panics, and every member it maps lies inside the archive
// at an offset that suits its element type.
func FuzzNPZ(f *testing.F) {
	member := func(hdr string, data []byte) []byte {
		b := []byte("\x93NUMPY\x01\x00\x00\x00")
		for (len(b)+len(hdr)+1)%64 != 0 {
			hdr += " "
		}
		hdr += "\n"
		b[8] = byte(len(hdr))
		return append(append(b, hdr...), data...)
	}
	for _, m := range []uint16{zip.Store, zip.Deflate} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i, hdr := range []string{
			"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
			"{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }",
			"{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
		} {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("m%d.npy", i), Method: m})
			w.Write(member(hdr, make([]byte, 24)))
		}
		zw.Close()
		f.Add(buf.Bytes())
	}
	// Archives written by Python's zipfile (zip64 local headers; stored,
	// deflate, bzip2, LZMA): testdata/npz/gen.py.
	for _, name := range []string{"stored", "deflate", "bzip2", "lzma"} {
		if b, err := os.ReadFile("testdata/npz/" + name + ".npz"); err == nil {
			f.Add(b)
		}
	}
	var aligned bytes.Buffer // stored and aligned: every member mapped
	if err := WriteNPZ(&aligned, []Named{
		{Name: "a", Tensor: dlpack.NewArray([]float64{1, 2, 3}, nil)},
		{Name: "b", Tensor: dlpack.NewArray([]int16{1, 2, 3, 4}, []int64{2, 2})},
	}, false); err == nil {
		f.Add(aligned.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		m := &mapping{data: b} // Go memory standing in for a mapping: never released
		m.refs.Store(1)
		file := &File{m: m}
		err := file.loadNPZ(bytes.NewReader(b), int64(len(b)), crcAtOpen)
		for _, buf := range file.bufs {
			buf.Close()
		}
		if err != nil {
			return
		}
		// What opens checked at once opens lazily too, and every member's
		// check on first use then passes.
		lazy := &File{m: m}
		err = lazy.loadNPZ(bytes.NewReader(b), int64(len(b)), crcLazy)
		for _, buf := range lazy.bufs {
			buf.Close()
		}
		if err != nil {
			t.Fatalf("checked at open, but not lazily: %v", err)
		}
		for _, tn := range lazy.tensors {
			if err := tn.checkCRC(); err != nil || (tn.lazy != nil && !tn.CRCChecked()) {
				t.Fatalf("%v: checked at open, but its lazy check: %v", tn, err)
			}
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		for _, tn := range file.tensors {
			if tn.buf != nil || tn.data == nil {
				continue
			}
			off := uintptr(tn.data) - base
			if off+uintptr(tn.nbytes) > uintptr(len(b)) || off%uintptr(tn.dtype.Alignment()) != 0 {
				t.Fatalf("%v mapped at %d+%d of %d bytes", tn, off, tn.nbytes, len(b))
			}
		}
	})
}
