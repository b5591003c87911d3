package tensorfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/godlpack/dlpack"
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
// shape x item size bytes, and reads as encoding/json reads it. It reads
// the header in chunks (stScanner's window): read 1, 3, 7 and 64 bytes
// at a time, a header gives the same tensors or the same error, byte for
// byte, as read whole.
func FuzzSafetensorsHeader(f *testing.F) {
	for _, s := range []string{
		`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`,
		`{"__metadata__":{"k":"v"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`,
		`{"a":{"dtype":"F8_E4M3","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`,
		`{"a\u00e9\ud83d\ude00x":{"dtype":"U8","shape":[12],"data_offsets":[0,12],"x":{"y":[1,-2.5e3,true,null,"\n"]}},"__metadata__":{"k\t":"v\"\\\/"}}`,
		"{\"\u00e9\u00e9\u00e9\":{\"dtype\":\"U8\",\"shape\":[12],\"data_offsets\":[0,12]},\"\u00e9\":{}}",
		`{"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"a":{"dtype":"U8","shape":[6],"data_offsets":[6,12]}}`,
	} {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
		f.Add(append(append(b, s...), make([]byte, 12)...))
	}
	for _, s := range []string{`{}`, `{}  `, `{"__metadata__":{}}`, ` {} `, "{}\xe2\x82", "{} x   "} { // no tensors, no data
		f.Add(append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseSafetensors(bytes.NewReader(b), int64(len(b)), len(b))
		for _, chunk := range []int{1, 3, 7, 64} {
			hc, errc := parseSafetensors(bytes.NewReader(b), int64(len(b)), chunk)
			if fmt.Sprint(errc) != fmt.Sprint(err) || !reflect.DeepEqual(projection(hc), projection(h)) {
				t.Fatalf("read %d bytes at a time: %v, %v; read whole: %v, %v", chunk, projection(hc), errc, projection(h), err)
			}
		}
		ref, refErr := refParseSafetensors(b, int64(len(b)))
		if err != nil {
			return
		}
		// Whatever the scanner accepts, encoding/json accepts the same.
		if refErr != nil {
			t.Fatalf("accepted what encoding/json refuses (%v)", refErr)
		}
		if got, want := projection(h), projection(ref); !reflect.DeepEqual(got, want) {
			t.Fatalf("the scanner read %+v, encoding/json %+v", got, want)
		}
		at := h.dataBase
		for _, tn := range h.tensors {
			n, _, err := layout("shape", tn.shape(), tn.dtype.ItemSize(), false)
			if err != nil || tn.off != at || tn.nbytes != n || tn.strides() != nil {
				t.Fatalf("accepted %+v at %d (err %v)", tn, at, err)
			}
			at = tn.off + tn.nbytes
		}
		if at != int64(len(b)) {
			t.Fatalf("tensors end at %d of %d bytes", at, len(b))
		}
	})
}

// stView is what a header says of a tensor.
type stView struct {
	Name   string
	DType  dlpack.DataType
	Shape  []int64
	Off, N int64
}

// projection is what a parsed header says: an empty list or map is the
// same header however it was made.
func projection(h *stHeader) any {
	if h == nil {
		return nil
	}
	var ts []stView
	for _, t := range h.tensors {
		ts = append(ts, stView{t.name, t.dtype, slices.Clone(t.shape()), t.off, t.nbytes})
	}
	meta := h.meta
	if len(meta) == 0 {
		meta = nil
	}
	return struct {
		Tensors  []stView
		Meta     map[string]string
		DataBase int64
	}{ts, meta, h.dataBase}
}

// safetensorsJSON checks the 8-byte length of a safetensors file b of
// size bytes and returns the JSON object it frames: in the file, under
// the size limit, starting with '{', valid UTF-8; parseSafetensors makes
// the same checks on a header it reads in chunks.
func safetensorsJSON(b []byte, size int64) ([]byte, error) {
	if len(b) < 8 || size < 8 {
		return nil, fieldErr(ErrTruncated, "file size", size, "shorter than the 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxSafetensorsHeader {
		return nil, fieldErr(ErrFormat, "header length", n, "over the 100 MB limit")
	}
	if n > uint64(size-8) || n > uint64(len(b)-8) {
		return nil, fieldErr(ErrTruncated, "header length", n, fmt.Sprintf("past the end of the file (%d bytes)", size))
	}
	hdr := b[8 : 8+n]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(hdr), " "), 40)), "must be a JSON object starting with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, fieldErr(ErrFormat, "header", "invalid UTF-8", "the JSON header must be UTF-8")
	}
	return hdr, nil
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
		tn := &Tensor{name: name}
		var dt string
		if info.DType != nil {
			dt = *info.DType
		}
		if err := checkEntry(tn, new(dimArena), h.dataBase, dt, info.DType != nil, info.Shape, offs); err != nil {
			return nil, err
		}
		h.tensors = append(h.tensors, tn)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	if rest := bytes.TrimLeft(hdr[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(rest), " "), 40)), "text after the JSON object")
	}
	return h, checkOffsets(h.tensors, h.dataBase, size)
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
			if err := tn.checkCRC(); err != nil || (tn.x != nil && tn.x.lazy != nil && !tn.CRCChecked()) {
				t.Fatalf("%v: checked at open, but its lazy check: %v", tn, err)
			}
		}
		for _, tn := range file.tensors {
			if tn.buf() != nil || tn.nbytes == 0 {
				continue
			}
			if tn.off < 0 || tn.off+tn.nbytes > int64(len(b)) || tn.off%int64(tn.dtype.Alignment()) != 0 {
				t.Fatalf("%v mapped at %d+%d of %d bytes", tn, tn.off, tn.nbytes, len(b))
			}
		}
	})
}
