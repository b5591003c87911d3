//go:build cgo

package tensorfile_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

type badFile struct {
	format string // "npy", "npz" or "safetensors"
	what   string
	data   []byte
	want   error
}

var f8x3 = make([]byte, 24)

func stHdr(entries string) []byte { return stBytes("{"+entries+"}", nil) }

// badFiles is the catalogue of rejected files (docs/rejects-files.md).
var badFiles = []badFile{
	{"npy", "empty file", nil, tensorfile.ErrTruncated},
	{"npy", "5 bytes of magic", []byte("\x93NUMP"), tensorfile.ErrTruncated},
	{"npy", "wrong magic", []byte("\x93NUMPX\x01\x00\x00\x00"), tensorfile.ErrFormat},
	{"npy", "version 4.0", append([]byte("\x93NUMPY\x04\x00"), make([]byte, 60)...), tensorfile.ErrFormat},
	{"npy", "version 1.1", append([]byte("\x93NUMPY\x01\x01"), make([]byte, 60)...), tensorfile.ErrFormat},
	{"npy", "version 2.0 cut inside the preamble", []byte("\x93NUMPY\x02\x00\x10\x00"), tensorfile.ErrTruncated},
	{"npy", "header length past the end", append([]byte("\x93NUMPY\x01\x00\x00\x10"), "{'descr': '<f8'}"...), tensorfile.ErrTruncated},
	{"npy", "header length 2^32-1 (version 2.0)", append([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff"), "{}"...), tensorfile.ErrFormat},
	{"npy", "valid header padded to 10,001 bytes (NumPy's max_header_size is 10,000)", npyPadded(10_001, f8x3), tensorfile.ErrFormat},
	{"npy", "header is a list", npyBytes("['<f8', False, (3,)]", f8x3), tensorfile.ErrFormat},
	{"npy", "key shape missing", npyBytes("{'descr': '<f8', 'fortran_order': False, }", f8x3), tensorfile.ErrFormat},
	{"npy", "unknown key", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1, }", f8x3), tensorfile.ErrFormat},
	{"npy", "repeated key", npyBytes("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrFormat},
	{"npy", "unterminated string", npyBytes("{'descr': '<f8", f8x3), tensorfile.ErrFormat},
	{"npy", "backslash escape in a string", npyBytes(`{'descr': '<f\8', 'fortran_order': False, 'shape': (3,), }`, f8x3), tensorfile.ErrFormat},
	{"npy", "text after the dict", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), } x", f8x3), tensorfile.ErrFormat},
	{"npy", "NUL after the dict", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\x00", f8x3), tensorfile.ErrFormat},
	{"npy", "missing ':'", npyBytes("{'descr' '<f8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrFormat},
	{"npy", "fortran_order not a bool", npyBytes("{'descr': '<f8', 'fortran_order': 0, 'shape': (3,), }", f8x3), tensorfile.ErrFormat},
	{"npy", "object dtype", npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "object dtype with size", npyBytes("{'descr': '|O8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "structured dtype", npyBytes("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "unicode string dtype", npyBytes("{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "datetime dtype", npyBytes("{'descr': '<M8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "float128", npyBytes("{'descr': '<f16', 'fortran_order': False, 'shape': (3,), }", make([]byte, 48)), tensorfile.ErrDType},
	{"npy", "float64 without byte order ('|f8')", npyBytes("{'descr': '|f8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "unknown type character", npyBytes("{'descr': '<x4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 12)), tensorfile.ErrDType},
	{"npy", "item size with a sign", npyBytes("{'descr': '<f+8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrDType},
	{"npy", "big-endian float64 (OpenNPY; ReadNPY converts it)", npyBytes("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", f8x3), tensorfile.ErrByteOrder},
	{"npy", "one-element shape without a comma", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3), }", f8x3), tensorfile.ErrFormat},
	{"npy", "shape not a tuple", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': [3], }", f8x3), tensorfile.ErrFormat},
	{"npy", "negative dimension", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,), }", f8x3), tensorfile.ErrLayout},
	{"npy", "fractional dimension", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2.5,), }", f8x3), tensorfile.ErrFormat},
	{"npy", "dimension with a leading zero", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (03,), }", f8x3), tensorfile.ErrFormat},
	{"npy", "dimension over int64", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", f8x3), tensorfile.ErrLayout},
	{"npy", "element count overflows", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", f8x3), tensorfile.ErrLayout},
	{"npy", "byte size overflows", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", f8x3), tensorfile.ErrLayout},
	{"npy", "65 dimensions", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': ("+strings.Repeat("1, ", 65)+"), }", make([]byte, 8)), tensorfile.ErrLayout},
	{"npy", "header says 4 elements, data holds 3", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", f8x3), tensorfile.ErrTruncated},
	{"npy", "header says 2 elements, data holds 3", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", f8x3), tensorfile.ErrTruncated},
	{"npy", "version 3.0 with a non-ASCII key", npyVersion(3, "{'descr': '<f8', 'fortran_order': False, 'shapé': (3,), }", f8x3), tensorfile.ErrFormat},

	{"safetensors", "empty file", nil, tensorfile.ErrTruncated},
	{"safetensors", "7 bytes", make([]byte, 7), tensorfile.ErrTruncated},
	{"safetensors", "header length past the end", binary.LittleEndian.AppendUint64(nil, 64), tensorfile.ErrTruncated},
	{"safetensors", "header length 2^64-1", binary.LittleEndian.AppendUint64(nil, 1<<64-1), tensorfile.ErrFormat},
	{"safetensors", "header length over 100 MB", binary.LittleEndian.AppendUint64(nil, 100_000_001), tensorfile.ErrFormat},
	{"safetensors", "header does not start with '{'", stBytes(` {}`, nil), tensorfile.ErrFormat},
	{"safetensors", "header is a JSON array", stBytes(`[]`, nil), tensorfile.ErrFormat},
	{"safetensors", "JSON cut short", stBytes(`{"a":{"dtype":"F32"`, nil), tensorfile.ErrFormat},
	{"safetensors", "invalid UTF-8", stBytes("{\"\xff\":{}}", nil), tensorfile.ErrFormat},
	{"safetensors", "text after the JSON object", stBytes(`{} x`, nil), tensorfile.ErrFormat},
	{"safetensors", "repeated name", stBytes(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, nil), tensorfile.ErrFormat},
	{"safetensors", "tensor info not an object", stHdr(`"a":[1,2]`), tensorfile.ErrFormat},
	{"safetensors", "dtype missing", stHdr(`"a":{"shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "unknown dtype", stHdr(`"a":{"dtype":"F128","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrDType},
	{"safetensors", "sub-byte dtype F4", stHdr(`"a":{"dtype":"F4","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrDType},
	{"safetensors", "dtype not a string", stHdr(`"a":{"dtype":7,"shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "negative dimension", stHdr(`"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "dimension over int64", stHdr(`"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}`), tensorfile.ErrLayout},
	{"safetensors", "element count overflows", stHdr(`"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}`), tensorfile.ErrLayout},
	{"safetensors", "byte size overflows", stHdr(`"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}`), tensorfile.ErrLayout},
	{"safetensors", "three data offsets", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "negative data offset", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,-1]}`), tensorfile.ErrTruncated},
	{"safetensors", "data offset over int64", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[9223372036854775808,9223372036854775808]}`), tensorfile.ErrTruncated},
	{"safetensors", "end before begin", stBytes(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4)), tensorfile.ErrLayout},
	{"safetensors", "offsets disagree with shape x dtype", stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), tensorfile.ErrLayout},
	{"safetensors", "offsets past the end of the file", stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)), tensorfile.ErrTruncated},
	{"safetensors", "overlapping tensors", stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), tensorfile.ErrLayout},
	{"safetensors", "gap between tensors", stBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)), tensorfile.ErrLayout},
	{"safetensors", "data section longer than the tensors", stBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)), tensorfile.ErrTruncated},
	{"safetensors", "control character in a name", stHdr("\"a\x01\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}"), tensorfile.ErrFormat},
	{"safetensors", "bad escape in a name", stHdr(`"a\q":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "name with a lone high surrogate escape", stHdr(`"a\ud800":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "name with a high surrogate escape before a letter", stHdr(`"a\ud800x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "name with two high surrogate escapes", stHdr(`"\ud83d\ud83d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "name with a lone low surrogate escape", stHdr(`"\ude00a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "metadata value with a lone surrogate escape", stHdr(`"__metadata__":{"k":"v\udfff"}`), tensorfile.ErrFormat},
	{"safetensors", "metadata key with a lone surrogate escape", stHdr(`"__metadata__":{"k\ud800":"v"}`), tensorfile.ErrFormat},
	{"safetensors", "entry key with a lone surrogate escape", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"\udc00":1}`), tensorfile.ErrFormat},
	{"safetensors", "dtype with a lone surrogate escape", stHdr(`"a":{"dtype":"F32\ud800","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "surrogate escape in an unknown field", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":["\ud800"]}`), tensorfile.ErrFormat},
	{"safetensors", "field repeated in an entry", stHdr(`"a":{"dtype":"U8","dtype":"U8","shape":[0],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "fractional dimension", stHdr(`"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}`), tensorfile.ErrFormat},
	{"safetensors", "number with a leading zero", stHdr(`"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}`), tensorfile.ErrFormat},
	{"safetensors", "unknown literal in an unknown field", stHdr(`"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":nul}`), tensorfile.ErrFormat},
	{"safetensors", "NUL after the JSON object", stBytes("{}\x00", nil), tensorfile.ErrFormat},
	{"safetensors", "metadata value not a string", stHdr(`"__metadata__":{"k":1}`), tensorfile.ErrFormat},

	{"npz", "not a zip archive", []byte("PK\x03\x04 not really"), tensorfile.ErrFormat},
	{"npz", "stored member with a lying header", npzBytes(map[string][]byte{"a.npy": npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", f8x3)}, zip.Store), tensorfile.ErrTruncated},
	{"npz", "deflated member with a lying header", npzBytes(map[string][]byte{"a.npy": npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", f8x3)}, zip.Deflate), tensorfile.ErrTruncated},
	{"npz", "stored member of object dtype", npzBytes(map[string][]byte{"a.npy": npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", f8x3)}, zip.Store), tensorfile.ErrDType},
	{"npz", "stored member with a 10,001-byte header", npzBytes(map[string][]byte{"a.npy": npyPadded(10_001, f8x3)}, zip.Store), tensorfile.ErrFormat},
	{"npz", "deflated member with a 10,001-byte header", npzBytes(map[string][]byte{"a.npy": npyPadded(10_001, f8x3)}, zip.Deflate), tensorfile.ErrFormat},
	{"npz", "central directory CRC differs from the data descriptor's", badCRC(), tensorfile.ErrFormat},
	{"npz", "deflated member claiming 1 TB", bomb(), tensorfile.ErrTruncated},
	{"npz", "stored member with a flipped data byte", flipped(zip.Store), tensorfile.ErrChecksum},
	{"npz", "deflated member with a flipped data byte", flipped(zip.Deflate), tensorfile.ErrChecksum},
	{"npz", "local header names z.npy, central directory a.npy", localName(), tensorfile.ErrFormat},
	{"npz", "local header method differs from the central directory's", patchLocal(8, 0, 8), tensorfile.ErrFormat},
	{"npz", "local header CRC differs from the central directory's", patchLocal(14, 0, 0x12345678), tensorfile.ErrFormat},
	{"npz", "local header size differs from the central directory's", patchLocal(22, 0, 7), tensorfile.ErrFormat},
	{"npz", "encrypted member (flag bit 0)", patchCentral(8, 1, 0), tensorfile.ErrFormat},
	{"npz", "unknown compression method 99", patchLocal(8, 99, 99), tensorfile.ErrFormat},
	{"npz", "name flagged UTF-8 (bit 11) that is not", utf8Flagged(), tensorfile.ErrFormat},
	{"npz", "local header offset past the end", patchCentral(42, 0xfffffff0, 32), tensorfile.ErrTruncated},
	{"npz", "central directory offset past the end record", patchEnd(16, 0x7fffffff), tensorfile.ErrFormat},
	{"npz", "archive after a stub (zipfile reads it, np.load does not)", append([]byte("#!stub\n"), npzBytes(map[string][]byte{"a.npy": member3()}, zip.Store)...), tensorfile.ErrFormat},
	{"npz", "bzip2 member claiming 4 GB", bzip2Bomb(), tensorfile.ErrTruncated},
	{"npz", "LZMA member with a properties size of 6", lzmaNPZ(func(b []byte) []byte { b[2] = 6; return b }), tensorfile.ErrFormat},
	{"npz", "LZMA member with lc+lp over 4", lzmaNPZ(func(b []byte) []byte { b[4] = 4 + 9*1; return b }), tensorfile.ErrFormat},
	{"npz", "LZMA member cut short", lzmaNPZ(func(b []byte) []byte { return b[:len(b)/2] }), tensorfile.ErrTruncated},
	{"npz", "LZMA member with a match before any data", lzmaNPZ(func(b []byte) []byte { b[10] = 0xff; return b }), tensorfile.ErrFormat},
	{"npz", "LZMA member of 89 bytes claiming 4 GB", lzmaBomb(), tensorfile.ErrTruncated},
	{"npz", "LZMA member with a flipped byte", lzmaNPZ(func(b []byte) []byte { b[20] ^= 0x01; return b }), tensorfile.ErrFormat},
	{"npz", "two members named a.npy", twoNamed(), tensorfile.ErrFormat},
}

// peerReads gives, for each file of the catalogue that its format's
// reference reader reads (np.load, every member of an .npz read;
// safetensors.deserialize), what the reader makes of it and why this
// package refuses it; every other file the reader refuses too.
// TestPeersRejects holds both halves to the readers of the pinned venv.
var peerReads = map[string]string{
	"npy/repeated key":                                             "NumPy keeps the last value of a repeated key; refused, as a reader keeping the first would read another array",
	"npy/structured dtype":                                         "DLPack has no structured type",
	"npy/unicode string dtype":                                     "DLPack has no string type",
	"npy/datetime dtype":                                           "DLPack has no datetime type",
	"npy/float128":                                                 "NumPy's float128 is the platform's long double (x87 80-bit on x86, padded): DLPack has no such type",
	"npy/float64 without byte order ('|f8')":                       "NumPy reads it in the host's byte order; refused, as '|' means no byte order, which only one-byte types have",
	"npy/item size with a sign":                                    "NumPy's dtype parser takes '+8' as 8; refused, as no writer makes it",
	"npy/big-endian float64 (OpenNPY; ReadNPY converts it)":        "OpenNPY maps, and big-endian data cannot be shared with a little-endian consumer; ReadNPY reads it, converted",
	"npy/header says 2 elements, data holds 3":                     "np.load reads the first 2 elements and ignores the rest; refused, as the file is not the array its header describes (a file written over, or appended to)",
	"safetensors/header does not start with '{'":                   "the safetensors crate skips JSON whitespace; the format's definition requires the header to start with '{'",
	"safetensors/repeated name":                                    "the safetensors crate's JSON map keeps the last entry of a name; refused, as one of the two tensors would be hidden",
	"safetensors/sub-byte dtype F4":                                "safetensors reads the sub-byte F4 and F6 types; this package does not (DLPack's packing of sub-byte types is not the file's)",
	"npz/deflated member claiming 1 TB":                            "zipfile inflates until the stream ends, whatever the member claims; refused before inflating, as the claim is more than deflate can expand the member to (the bound on decompression bombs)",
	"npz/bzip2 member claiming 4 GB":                               "zipfile decompresses until the stream ends, whatever the member claims; refused before decompressing, as the claim is more than bzip2 can expand the member to",
	"npz/LZMA member of 89 bytes claiming 4 GB":                    "zipfile decompresses until the stream ends, whatever the member claims; refused before decompressing, as the claim is more than LZMA can expand the member to",
	"npz/local header method differs from the central directory's": "zipfile follows the central directory and ignores the local header's method; refused, as the member's two headers disagree",
	"npz/local header CRC differs from the central directory's":    "zipfile follows the central directory and ignores the local header's CRC-32; refused, as the member's two headers disagree",
	"npz/local header size differs from the central directory's":   "zipfile follows the central directory and ignores the local header's sizes; refused, as the member's two headers disagree",
	"npz/two members named a.npy":                                  "zipfile keeps the last entry of a name, so np.load reads the last member; refused, as one of the two would be hidden",
}

// twoNamed is an archive of two stored members both named a.npy, of
// different arrays.
func twoNamed() []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range [][]byte{member3(), npyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", []byte{7, 9})} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "a.npy", Method: zip.Store})
		if err != nil {
			panic(err)
		}
		w.Write(m)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// bzip2Bomb is testdata/npz/bzip2.npz (written by zipfile) with its first
// member claiming 4 GB uncompressed, in the central directory and in the
// zip64 extra field of the local header.
func bzip2Bomb() []byte {
	b, err := os.ReadFile("testdata/npz/bzip2.npz")
	if err != nil {
		panic(err)
	}
	if string(b[30:35]) != "a.npy" || binary.LittleEndian.Uint16(b[35:]) != 1 {
		panic("testdata/npz/bzip2.npz: not the layout expected")
	}
	binary.LittleEndian.PutUint64(b[39:], 0xfffffff0)
	binary.LittleEndian.PutUint32(b[bytes.Index(b, []byte("PK\x01\x02"))+24:], 0xfffffff0)
	return b
}

// lzmaBomb is lzmaNPZ's archive with both headers claiming 4 GB
// uncompressed.
func lzmaBomb() []byte {
	b := lzmaNPZ(func(b []byte) []byte { return b })
	binary.LittleEndian.PutUint32(b[22:], 0xfffffff0)
	binary.LittleEndian.PutUint32(b[bytes.LastIndex(b, []byte("PK\x01\x02"))+24:], 0xfffffff0)
	return b
}

// lzmaNPZ is an archive of one LZMA member (as zipfile writes it, the
// end marker flagged), member3 compressed by liblzma
// (testdata/lzma/npy3.lzma), its data passed through edit.
func lzmaNPZ(edit func([]byte) []byte) []byte {
	b, err := os.ReadFile("testdata/lzma/npy3.lzma")
	if err != nil {
		panic(err)
	}
	return zipRaw(&zip.FileHeader{Name: "a.npy", Method: 14, Flags: 2, CRC32: crc32.ChecksumIEEE(member3()),
		UncompressedSize64: uint64(len(member3()))}, edit(b))
}

// member3 is a .npy of three float64 zeros.
func member3() []byte {
	return npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8x3)
}

// flipped is an archive of one member written with the given method
// whose data has one byte flipped after its CRC-32 was taken.
func flipped(method uint16) []byte {
	m := member3()
	crc := crc32.ChecksumIEEE(m)
	m[len(m)-1] ^= 0x01
	return rawNPZ("a.npy", m, method, crc, 0)
}

// rawNPZ is an archive of one member, data m compressed with method,
// with the given CRC-32 and flags, written without a data descriptor.
func rawNPZ(name string, m []byte, method uint16, crc uint32, flags uint16) []byte {
	body := m
	if method == zip.Deflate {
		var c bytes.Buffer
		fw, _ := flate.NewWriter(&c, flate.BestCompression)
		fw.Write(m)
		fw.Close()
		body = c.Bytes()
	}
	return zipRaw(&zip.FileHeader{Name: name, Method: method, CRC32: crc, Flags: flags, UncompressedSize64: uint64(len(m))}, body)
}

// zipRaw is an archive of one member: fh's header (its compressed size
// set), then body as it is, without a data descriptor.
func zipRaw(fh *zip.FileHeader, body []byte) []byte {
	fh.CompressedSize64 = uint64(len(body))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(fh)
	if err != nil {
		panic(err)
	}
	w.Write(body)
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// localName is an archive whose local header names z.npy and whose
// central directory names a.npy.
func localName() []byte {
	b := rawNPZ("a.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0)
	copy(b[30:], "z.npy")
	return b
}

// patchLocal is a stored archive of one member (no data descriptor)
// with the 2- or 4-byte field at off of the local header set to v, and
// the central directory's at the same place (+16) to cv when not 0.
func patchLocal(off int, cv, v uint32) []byte {
	b := rawNPZ("a.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0)
	put := func(p []byte, v uint32) {
		if off == 8 {
			binary.LittleEndian.PutUint16(p, uint16(v))
		} else {
			binary.LittleEndian.PutUint32(p, v)
		}
	}
	put(b[off:], v)
	if cv != 0 {
		put(b[bytes.LastIndex(b, []byte("PK\x01\x02"))+off+2:], cv)
	}
	return b
}

// patchCentral is patchLocal's archive with the central directory field
// at off set to v: a 4-byte field if width is 32, else the 2-byte flags,
// set in the local header too.
func patchCentral(off int, v uint32, width int) []byte {
	b := rawNPZ("a.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0)
	i := bytes.LastIndex(b, []byte("PK\x01\x02")) + off
	if width == 0 {
		binary.LittleEndian.PutUint16(b[i:], uint16(v))
		binary.LittleEndian.PutUint16(b[6:], uint16(v)) // the local flags too
	} else {
		binary.LittleEndian.PutUint32(b[i:], v)
	}
	return b
}

// patchEnd is a stored archive with the 4-byte field at off of the end
// of central directory record set to v.
func patchEnd(off int, v uint32) []byte {
	b := rawNPZ("a.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0)
	binary.LittleEndian.PutUint32(b[bytes.LastIndex(b, []byte("PK\x05\x06"))+off:], v)
	return b
}

// utf8Flagged is an archive whose member name, flagged UTF-8, is the
// CP437 byte 0x82.
func utf8Flagged() []byte {
	return rawNPZ("\x82.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0x800)
}

// badCRC is an archive whose one deflated member's CRC is wrong.
func badCRC() []byte {
	b := npzBytes(map[string][]byte{"a.npy": npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8x3)}, zip.Deflate)
	i := bytes.LastIndex(b, []byte("PK\x01\x02")) // central directory entry: CRC at +16
	b[i+16] ^= 0xff
	return b
}

// bomb is an archive whose deflated member claims 1 TB uncompressed.
func bomb() []byte {
	b := npzBytes(map[string][]byte{"a.npy": npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8x3)}, zip.Deflate)
	i := bytes.LastIndex(b, []byte("PK\x01\x02")) // uncompressed size at +24
	binary.LittleEndian.PutUint32(b[i+24:], 0xfffffff0)
	i = bytes.LastIndex(b, []byte("PK\x07\x08")) // and in the data descriptor, at +12
	binary.LittleEndian.PutUint32(b[i+12:], 0xfffffff0)
	return b
}

func openAs(t testing.TB, c badFile) error {
	p := writeTemp(t, "bad."+c.format, c.data)
	var f *tensorfile.File
	var err error
	switch c.format {
	case "npy":
		f, err = tensorfile.OpenNPY(p)
		if !errors.Is(c.want, tensorfile.ErrByteOrder) {
			if g, cerr := tensorfile.ReadNPY(p); cerr == nil || !errors.Is(cerr, c.want) {
				if g != nil {
					g.Close()
				}
				t.Errorf("%s: ReadNPY: got %v, want %v", c.what, cerr, c.want)
			}
		}
	case "npz":
		f, err = tensorfile.OpenNPZ(p)
	case "safetensors":
		f, err = tensorfile.OpenSafetensors(p)
	}
	if f != nil {
		f.Close()
	}
	return err
}

var fileSentinels = []struct {
	err  error
	name string
}{
	{tensorfile.ErrFormat, "ErrFormat"}, {tensorfile.ErrTruncated, "ErrTruncated"}, {tensorfile.ErrLayout, "ErrLayout"},
	{tensorfile.ErrDType, "ErrDType"}, {tensorfile.ErrByteOrder, "ErrByteOrder"}, {tensorfile.ErrChecksum, "ErrChecksum"},
}

// TestRejectsCatalogueIsCurrent opens every file of the catalogue, requires
// the sentinel it lists and a *dlpack.FieldError, and renders the table
// with the errors really produced as docs/rejects-files.md, failing if the
// committed file differs (UPDATE_DOCS=1 rewrites it).
func TestRejectsCatalogueIsCurrent(t *testing.T) {
	noLiveMappings(t)
	var b strings.Builder
	b.WriteString(`# Tensor files that package tensorfile rejects, and why

Generated by ` + "`TestRejectsCatalogueIsCurrent`" + ` (package ` + "`tensorfile`" + `) from its table
of malformed .npy, .npz and safetensors files. For every row, opening the
file fails with the sentinel shown (test it with ` + "`errors.Is`" + `), the error is a
` + "`*dlpack.FieldError`" + ` naming the field, nothing stays mapped, and nothing is
read outside the file. .npy rows are checked with both ` + "`OpenNPY`" + ` and
` + "`ReadNPY`" + ` (except the big-endian row, which ` + "`ReadNPY`" + ` converts). Regenerate
with ` + "`UPDATE_DOCS=1 go test -run TestRejectsCatalogueIsCurrent ./tensorfile`" + `

The reference reader column says what the format's reference reader
(np.load, every member of an .npz read; safetensors.deserialize) makes
of the same file: most it refuses too; where it reads the file, the
column says how, and why this package refuses it. ` + "`TestPeersRejects`" + `
(` + "`make files`" + `) holds the column to the readers of the pinned venv.

Files written by the peers themselves (NumPy, safetensors, zipfile,
pyarrow), valid and hostile, with what their reference readers and this
package make of each, are the conformance corpus:
[conformance.md](conformance.md).

`)
	reads := 0
	for _, c := range badFiles {
		if peerReads[c.format+"/"+c.what] != "" {
			reads++
		}
	}
	if reads != len(peerReads) {
		t.Errorf("%d entries of peerReads, %d of them name a file of the catalogue", len(peerReads), reads)
	}
	fmt.Fprintf(&b, "%d files; the reference reader reads %d of them.\n\n| # | format | file | sentinel | message | reference reader |\n|---|---|---|---|---|---|\n", len(badFiles), reads)
	for i, c := range badFiles {
		err := openAs(t, c)
		if err == nil {
			t.Errorf("%s %s: opened", c.format, c.what)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s %s: got %v, want %v", c.format, c.what, err, c.want)
		}
		var fe *dlpack.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s %s: %v is not a *dlpack.FieldError", c.format, c.what, err)
		}
		name := "?"
		for _, s := range fileSentinels {
			if errors.Is(err, s.err) {
				name = s.name
			}
		}
		msg := strings.ReplaceAll(err.Error(), "|", `\|`)
		peer := "raises"
		if why := peerReads[c.format+"/"+c.what]; why != "" {
			peer = "**reads it**: " + strings.ReplaceAll(why, "|", `\|`)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | `%s` | %s | %s |\n", i+1, c.format, c.what, name, msg, peer)
	}
	const path = "../docs/rejects-files.md"
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil || string(old) != b.String() {
		t.Errorf("%s is not current (err %v): run UPDATE_DOCS=1 go test -run TestRejectsCatalogueIsCurrent ./tensorfile", path, err)
	}
}

// TestPeersRejects reads every file of the catalogue with its format's
// reference reader (peers.py judge: np.load, every member of an .npz
// read; safetensors.deserialize): the files peerReads lists it must
// read, every other one it must refuse, so the catalogue's reference
// reader column is true of the pinned peers.
func TestPeersRejects(t *testing.T) {
	python(t)
	dir := t.TempDir()
	list := make([][2]string, len(badFiles))
	for i, c := range badFiles {
		list[i] = [2]string{fmt.Sprintf("%d.%s", i+1, c.format), c.format}
		if err := os.WriteFile(filepath.Join(dir, list[i][0]), c.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(dir, "judge.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(runPython(t, "testdata/peers.py", "judge", dir)), &got); err != nil {
		t.Fatal(err)
	}
	reads := 0
	for i, c := range badFiles {
		verdict, listed := got[list[i][0]], peerReads[c.format+"/"+c.what] != ""
		switch {
		case verdict == "":
			t.Errorf("%s %s: no verdict", c.format, c.what)
		case listed && verdict != "reads":
			t.Errorf("%s %s: listed as read by the reference reader, which %s", c.format, c.what, verdict)
		case !listed && verdict == "reads":
			t.Errorf("%s %s: the reference reader reads it: list it in peerReads, with why it is refused", c.format, c.what)
		case listed:
			reads++
		}
	}
	t.Logf("%d files of the catalogue: the reference readers read the %d listed as read, and refuse the others", len(badFiles), reads)
}
