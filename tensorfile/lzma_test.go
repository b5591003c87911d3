package tensorfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lzmaVectors are the members of testdata/lzma (written by liblzma
// through Python's lzma module, see gen.py) and what they decode to.
func lzmaVectors(t testing.TB) map[string][2][]byte {
	paths, err := filepath.Glob("testdata/lzma/*.lzma")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	vs := make(map[string][2][]byte)
	for _, p := range paths {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.ReadFile(strings.TrimSuffix(p, ".lzma") + ".bin")
		if err != nil {
			t.Fatal(err)
		}
		vs[filepath.Base(p)] = [2][]byte{in, out}
	}
	return vs
}

// decodeLZMA decodes the member data in as a zip LZMA member of size
// bytes, with or without the end-marker flag.
func decodeLZMA(in []byte, size uint64, marker bool) ([]byte, error) {
	e := &zipEntry{usize: size, csize: uint64(len(in)), field: `member "x.npy"`}
	if marker {
		e.flags = zipFlagEOSMarker
	}
	r, err := newZipLZMAReader(bytes.NewReader(in), e)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, io.LimitReader(r, int64(size)+1))
	return out.Bytes(), err
}

// Every vector decodes to liblzma's input, byte for byte, whether the
// member is flagged as ending with the end marker (bit 1, as zipfile
// writes it) or not (then it ends after its size, and the marker that
// follows is allowed).
func TestLZMAVectors(t *testing.T) {
	for name, v := range lzmaVectors(t) {
		for _, marker := range []bool{true, false} {
			got, err := decodeLZMA(v[0], uint64(len(v[1])), marker)
			if err != nil || !bytes.Equal(got, v[1]) {
				t.Errorf("%s (marker %v): %d bytes, equal %v, err %v", name, marker, len(got), bytes.Equal(got, v[1]), err)
			}
		}
	}
}

// Damaged members fail with an error, never a panic or wrong bytes
// reported as right: cut anywhere, a byte flipped anywhere, a size that
// is not the stream's.
func TestLZMADamaged(t *testing.T) {
	for name, v := range lzmaVectors(t) {
		in, want := v[0], v[1]
		n := uint64(len(want))
		if _, err := decodeLZMA(in, n+1, true); !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: a size one more than the stream's: %v, want ErrTruncated", name, err)
		}
		if n > 0 {
			if _, err := decodeLZMA(in, n-1, true); !errors.Is(err, ErrFormat) {
				t.Errorf("%s: a size one less than the stream's: %v, want ErrFormat", name, err)
			}
		}
		step := max(1, len(in)/50)
		for cut := 0; cut < len(in)-1; cut += step {
			if _, err := decodeLZMA(in[:cut], n, true); err == nil {
				t.Errorf("%s: cut at %d of %d: no error", name, cut, len(in))
			}
		}
		for i := lzmaZipHeaderLen; i < len(in); i += step {
			b := bytes.Clone(in)
			b[i] ^= 0x10
			// A flip may go unnoticed by the decoder (the member's CRC
			// catches it); what it must not do is panic or overrun.
			got, err := decodeLZMA(b, n, true)
			if err == nil && uint64(len(got)) != n {
				t.Errorf("%s: flip at %d: %d bytes, no error", name, i, len(got))
			}
		}
	}
	bad := map[string][]byte{
		"properties size 6": {9, 20, 6, 0, 0x5d, 0, 0, 1, 0, 0},
		"lc 4, lp 1":        {9, 20, 5, 0, 4 + 9*1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
		"lc/lp/pb byte 225": {9, 20, 5, 0, 225, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
		"header cut short":  {9, 20, 5, 0, 0x5d},
	}
	for what, in := range bad {
		if _, err := decodeLZMA(in, 10, true); err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}

// FuzzLZMA decodes arbitrary member data: no panic, never more bytes than
// the size, and exactly the size when no error is reported.
func FuzzLZMA(f *testing.F) {
	// Small seeds keep the minimisation of new inputs quick: the short
	// vectors whole, the first 600 bytes of the long ones.
	for _, v := range lzmaVectors(f) {
		f.Add(v[0][:min(len(v[0]), 600)], uint32(len(v[1])), true)
		f.Add(v[0][:min(len(v[0]), 600)], uint32(len(v[1])), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint32, marker bool) {
		size %= 1 << 16
		got, err := decodeLZMA(in, uint64(size), marker)
		if uint64(len(got)) > uint64(size) {
			t.Fatalf("%d bytes for a size of %d", len(got), size)
		}
		if err == nil && uint64(len(got)) != uint64(size) {
			t.Fatalf("%d bytes for a size of %d, no error", len(got), size)
		}
	})
}
