//go:build cgo

package tensorfile_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// npLoad is what np.load does with the archive b: the names it lists and
// "ok" or the exception it raises.
func npLoad(t *testing.T, b []byte) (files []string, result string) {
	t.Helper()
	out := runPython(t, "testdata/npz_peers.py", "load", writeTemp(t, "a.npz", b))
	var r struct {
		Files  []string `json:"files"`
		Result string   `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r.Files, r.Result
}

// The archives crafted byte by byte in the other tests, as NumPy sees
// them: the same names, and a refusal where OpenNPZ refuses.
func TestNPZPeersNumPyAgrees(t *testing.T) {
	python(t)
	noLiveMappings(t)
	files, res := npLoad(t, cp437Name(t))
	if !slices.Equal(files, []string{"é"}) || res != "ok" {
		t.Errorf("CP437 name: NumPy lists %q (%s), want [é]", files, res)
	}
	if files, res := npLoad(t, prefixed(t, false)); !slices.Equal(files, []string{"a"}) || res != "ok" {
		t.Errorf("archive with a comment: NumPy lists %q (%s), want [a]", files, res)
	}
	if _, res := npLoad(t, prefixed(t, true)); !strings.HasPrefix(res, "ValueError: This file contains pickled") {
		t.Errorf("archive after a stub: NumPy: %s, want it taken for a pickle and refused", res)
	}
	for _, c := range []struct {
		what, numpy string
		file        []byte
		want        error
	}{
		{"local header names z.npy", "BadZipFile: File name in directory 'a.npy' and header b'z.npy' differ.", localName(), tensorfile.ErrFormat},
		{"stored member with a flipped byte", "BadZipFile: Bad CRC-32 for file 'a.npy'", flipped(zip.Store), tensorfile.ErrChecksum},
		{"deflated member with a flipped byte", "BadZipFile: Bad CRC-32 for file 'a.npy'", flipped(zip.Deflate), tensorfile.ErrChecksum},
		{"flipped .npy header byte", "BadZipFile: Bad CRC-32 for file 'a.npy'", headerFlipped(), tensorfile.ErrChecksum},
	} {
		if _, res := npLoad(t, c.file); res != c.numpy {
			t.Errorf("%s: NumPy: %s, want %s", c.what, res, c.numpy)
		}
		f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", c.file))
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: OpenNPZ: %v, want %v", c.what, err, c.want)
		}
	}

	// A mapped member with a flipped byte: np.load lists it and fails as
	// it is read; OpenNPZ fails, and with LazyMappedCRC lists it and fails
	// its first use, the same way.
	var aligned bytes.Buffer
	if err := tensorfile.WriteNPZ(&aligned, []tensorfile.Named{{Name: "a", Tensor: dlpack.NewArray([]float64{1, 2, 3}, nil)}}, false); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(aligned.Bytes())
	bad[bytes.Index(bad, binary.LittleEndian.AppendUint64(nil, math.Float64bits(3)))] ^= 0x01
	if files, res := npLoad(t, bad); !slices.Equal(files, []string{"a"}) || res != "BadZipFile: Bad CRC-32 for file 'a.npy'" {
		t.Errorf("aligned stored member with a flipped byte: NumPy lists %q, %s", files, res)
	}
	p := writeTemp(t, "a.npz", bad)
	if f, err := tensorfile.OpenNPZ(p); !errors.Is(err, tensorfile.ErrChecksum) {
		if err == nil {
			f.Close()
		}
		t.Errorf("aligned stored member with a flipped byte: OpenNPZ: %v, want ErrChecksum", err)
	}
	f, err := tensorfile.OpenNPZ(p, tensorfile.LazyMappedCRC())
	if err != nil {
		t.Fatalf("aligned stored member with a flipped byte: OpenNPZ, LazyMappedCRC: %v", err)
	}
	defer f.Close()
	if tn, err := f.Tensor("a"); err != nil || !tn.Mapped() {
		t.Errorf("LazyMappedCRC: %v, %v; want a mapped member a", tn, err)
	} else if _, err := dlpack.From(tn); !errors.Is(err, tensorfile.ErrChecksum) {
		t.Errorf("LazyMappedCRC: first use: %v, want ErrChecksum", err)
	}
}

// headerFlipped is a stored archive whose member's shape was changed
// from (3,) to (4,) after its CRC-32 was taken.
func headerFlipped() []byte {
	m := member3()
	crc := crc32.ChecksumIEEE(m)
	m[bytes.Index(m, []byte("(3,)"))+1] = '4'
	return rawNPZ("a.npy", m, zip.Store, crc, 0)
}
