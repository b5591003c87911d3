//go:build cgo

package tensorfile_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// wantChecksumErr requires an ErrChecksum error naming the member and
// both CRCs.
func wantChecksumErr(t *testing.T, err error, member string, recorded, got uint32) {
	t.Helper()
	if !errors.Is(err, tensorfile.ErrChecksum) {
		t.Fatalf("got %v, want ErrChecksum", err)
	}
	for _, s := range []string{fmt.Sprintf("%q", member), fmt.Sprintf("0x%08x", recorded), fmt.Sprintf("0x%08x", got)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
}

// A byte flipped in a member's data fails the open on every read path:
// mapped, copied because misaligned, and decompressed.
func TestNPZFlippedByteFailsItsCRC(t *testing.T) {
	noLiveMappings(t)
	data := make([]byte, 64*8)
	for i := range data {
		data[i] = byte(i * 7)
	}
	m := npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (64,), }", data)
	bad := bytes.Clone(m)
	bad[len(bad)-64*8] ^= 0x01 // element 0
	good, flippedSum := crc32.ChecksumIEEE(m), crc32.ChecksumIEEE(bad)

	// Mapped: written aligned by WriteNPZ, then one byte of the file flipped.
	var aligned bytes.Buffer
	if err := tensorfile.WriteNPZ(&aligned, []tensorfile.Named{{Name: "a", Tensor: dlpack.NewArray(bytesToF64(data), nil)}}, false); err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(aligned.Bytes(), m)
	if at < 0 {
		t.Fatal("member not found in the archive")
	}
	mappedBad := bytes.Clone(aligned.Bytes())
	mappedBad[at+len(m)-64*8] ^= 0x01
	// Copied: stored misaligned, the byte flipped in the file.
	stored := npzBytes(map[string][]byte{"a.npy": m}, zip.Store)
	at = bytes.Index(stored, m)
	storedBad := bytes.Clone(stored)
	storedBad[at+len(m)-64*8] ^= 0x01

	for _, c := range []struct {
		name       string
		file       []byte
		wantMapped bool
	}{
		{"stored mapped", mappedBad, true},
		{"stored copied", storedBad, false},
		{"deflated", rawNPZ("a.npy", bad, zip.Deflate, good, 0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, "a.npz", c.file)
			f, err := tensorfile.OpenNPZ(p)
			if err == nil {
				f.Close()
			}
			wantChecksumErr(t, err, "a.npy", good, flippedSum)
			// SkipMappedCRC skips only what is mapped: a copied member is
			// read, so checked, anyway.
			f, err = tensorfile.OpenNPZ(p, tensorfile.SkipMappedCRC())
			if !c.wantMapped {
				if err == nil {
					f.Close()
				}
				wantChecksumErr(t, err, "a.npy", good, flippedSum)
				return
			}
			// A mapped member it skips is not read, so not checked, and
			// says so.
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tn, _ := f.Tensor("a")
			if !tn.Mapped() || tn.CRCChecked() {
				t.Errorf("mapped %v, CRC checked %v; want a mapped member, not checked", tn.Mapped(), tn.CRCChecked())
			}
		})
	}
	// The intact archives open, every member checked.
	for name, file := range map[string][]byte{"stored mapped": aligned.Bytes(), "stored copied": stored, "deflated": rawNPZ("a.npy", m, zip.Deflate, good, 0)} {
		f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tn, _ := f.Tensor("a")
		if !tn.CRCChecked() || tn.Mapped() != (name == "stored mapped") {
			t.Errorf("%s: mapped %v, CRC checked %v", name, tn.Mapped(), tn.CRCChecked())
		}
		f.Close()
	}
}

// A flipped byte that makes the .npy header itself wrong is reported as
// the CRC failure it is.
func TestNPZFlippedHeaderByteFailsItsCRC(t *testing.T) {
	noLiveMappings(t)
	m := member3()
	bad := bytes.Clone(m)
	i := bytes.Index(bad, []byte("(3,)"))
	bad[i+1] = '4'
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", rawNPZ("a.npy", bad, method, crc32.ChecksumIEEE(m), 0)))
		if err == nil {
			f.Close()
		}
		wantChecksumErr(t, err, "a.npy", crc32.ChecksumIEEE(m), crc32.ChecksumIEEE(bad))
	}
}

func bytesToF64(b []byte) []float64 {
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// cp437Name is an archive with one member named "\x82.npy" (é.npy in
// CP437), the UTF-8 flag (bit 11) clear in both headers.
func cp437Name(t testing.TB) []byte {
	b := rawNPZ("\x82.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0)
	if binary.LittleEndian.Uint16(b[6:])&0x800 != 0 || binary.LittleEndian.Uint16(b[bytes.LastIndex(b, []byte("PK\x01\x02"))+8:])&0x800 != 0 {
		t.Fatal("archive/zip set the UTF-8 flag")
	}
	return b
}

// Names are decoded as zipfile decodes them: CP437 unless flagged UTF-8.
func TestNPZNameDecoding(t *testing.T) {
	noLiveMappings(t)
	for want, file := range map[string][]byte{
		"é":   cp437Name(t),
		"é.x": rawNPZ("é.x.npy", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0x800),
		"╬":   rawNPZ("\xce.npy", member3(), zip.Deflate, crc32.ChecksumIEEE(member3()), 0),
		"a":   rawNPZ("a.npy\x00junk", member3(), zip.Store, crc32.ChecksumIEEE(member3()), 0),
	} {
		f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", file))
		if err != nil {
			t.Errorf("%s: %v", want, err)
			continue
		}
		if ts := f.Tensors(); len(ts) != 1 || ts[0].Name() != want {
			t.Errorf("tensors %v, want one named %q", ts, want)
		}
		f.Close()
	}
}

// Members written with a data descriptor (bit 3) are checked against it.
func TestNPZDataDescriptor(t *testing.T) {
	noLiveMappings(t)
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		b := npzBytes(map[string][]byte{"a.npy": member3()}, method)
		if binary.LittleEndian.Uint16(b[6:])&8 == 0 {
			t.Fatal("archive/zip wrote no data descriptor")
		}
		f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", b))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		i := bytes.LastIndex(b, []byte("PK\x07\x08"))
		b[i+8]++ // the descriptor's compressed size
		f, err = tensorfile.OpenNPZ(writeTemp(t, "a.npz", b))
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), "data descriptor compressed size") {
			t.Errorf("method %d: got %v, want the descriptor's size refused", method, err)
		}
	}
}

func TestNPZRefusesReadWrite(t *testing.T) {
	if f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", cp437Name(t)), tensorfile.ReadWrite()); err == nil {
		f.Close()
		t.Fatal("opened read-write")
	}
}

// An LZMA member as zipfile writes it (liblzma's stream, end marker
// flagged) reads as what was compressed, copied and CRC-checked.
func TestNPZLZMAMember(t *testing.T) {
	noLiveMappings(t)
	f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", lzmaNPZ(func(b []byte) []byte { return b })))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn, err := f.Tensor("a")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, tn.NBytes())
	if _, err := tn.CopyTo(got); err != nil {
		t.Fatal(err)
	}
	if tn.Mapped() || !tn.CRCChecked() || tn.DataType() != dlpack.Float64 || !bytes.Equal(got, f8x3) {
		t.Errorf("%v: CRC checked %v, data % x", tn, tn.CRCChecked(), got)
	}
}

// Archives written by Python's zipfile as np.savez writes members (zip64
// local headers), with each of its methods (testdata/npz/gen.py), read as
// np.load reads them.
func TestNPZZipfileArchives(t *testing.T) {
	noLiveMappings(t)
	for _, name := range []string{"stored", "deflate", "bzip2", "lzma"} {
		f, err := tensorfile.OpenNPZ("testdata/npz/" + name + ".npz")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		a, errA := f.Tensor("a")
		b, errB := f.Tensor("b")
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v %v", name, errA, errB)
		}
		ga, gb := make([]byte, a.NBytes()), make([]byte, b.NBytes())
		a.CopyTo(ga)
		b.CopyTo(gb)
		wa := binary.LittleEndian.AppendUint32(nil, 0)
		for i := uint32(1); i < 6; i++ {
			wa = binary.LittleEndian.AppendUint32(wa, i)
		}
		var wb []byte
		for i := range 3 {
			wb = binary.LittleEndian.AppendUint64(wb, math.Float64bits(float64(i)))
		}
		if a.DataType() != dlpack.Int32 || !slices.Equal(a.Shape(), []int64{2, 3}) || !bytes.Equal(ga, wa) ||
			b.DataType() != dlpack.Float64 || !slices.Equal(b.Shape(), []int64{3}) || !bytes.Equal(gb, wb) {
			t.Errorf("%s: %v % x, %v % x", name, a, ga, b, gb)
		}
		if !a.CRCChecked() || !b.CRCChecked() {
			t.Errorf("%s: CRC not checked", name)
		}
		f.Close()
	}
}

// An archive comment is allowed; bytes before the archive (a
// self-extractor's stub), which zipfile allows, are not, as np.load
// takes only files that start as a zip archive does.
func TestNPZCommentAndPrefix(t *testing.T) {
	noLiveMappings(t)
	f, err := tensorfile.OpenNPZ(writeTemp(t, "a.npz", prefixed(t, false)))
	if err != nil {
		t.Fatal(err)
	}
	if tn, err := f.Tensor("a"); err != nil || !tn.CRCChecked() {
		t.Errorf("%v %v", tn, err)
	}
	f.Close()
	f, err = tensorfile.OpenNPZ(writeTemp(t, "a.npz", prefixed(t, true)))
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, tensorfile.ErrFormat) {
		t.Errorf("an archive after a stub: %v, want ErrFormat", err)
	}
}

// prefixed is an archive of one deflated member with a comment, after
// 105 bytes of stub if stub (its offsets relative to its own start).
func prefixed(t testing.TB, stub bool) []byte {
	var buf bytes.Buffer
	if stub {
		buf.WriteString(strings.Repeat("#!stub\n", 15))
	}
	zw := zip.NewWriter(&buf)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "a.npy", Method: zip.Deflate})
	w.Write(member3())
	zw.SetComment("a comment\x00 PK\x05 with no end record in it")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
