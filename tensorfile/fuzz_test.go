package tensorfile

import (
	"encoding/binary"
	"slices"
	"testing"
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
	} {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
		f.Add(append(append(b, s...), make([]byte, 12)...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseSafetensors(b, int64(len(b)))
		if err != nil {
			return
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
