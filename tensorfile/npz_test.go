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
	"os"
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

// LazyMappedCRC: the open reads no member, each mapped member is checked
// on its first use, and a member whose bytes fail fails every use of it
// while the others serve.
func TestNPZLazyCRC(t *testing.T) {
	noLiveMappings(t)
	a := make([]float64, 64)
	for i := range a {
		a[i] = float64(i) / 3
	}
	b := []int32{1, -2, 3, -4, 5, -6}
	var archive bytes.Buffer
	if err := tensorfile.WriteNPZ(&archive, []tensorfile.Named{
		{Name: "a", Tensor: dlpack.NewArray(a, nil)},
		{Name: "b", Tensor: dlpack.NewArray(b, []int64{2, 3})},
	}, false); err != nil {
		t.Fatal(err)
	}
	// b's member as the archive holds it, and with its last byte flipped
	bData := binary.LittleEndian.AppendUint32(nil, uint32(b[0]))
	for _, v := range b[1:] {
		bData = binary.LittleEndian.AppendUint32(bData, uint32(v))
	}
	at := bytes.Index(archive.Bytes(), bData)
	if at < 0 {
		t.Fatal("b's data not found in the archive")
	}
	hdr := bytes.LastIndex(archive.Bytes()[:at], []byte("\x93NUMPY"))
	member := archive.Bytes()[hdr : at+len(bData)]
	bad := bytes.Clone(archive.Bytes())
	bad[at+len(bData)-1] ^= 0x80
	good, flipped := crc32.ChecksumIEEE(member), crc32.ChecksumIEEE(bad[hdr:at+len(bData)])
	p := writeTemp(t, "ab.npz", bad)

	// The checked open fails on b; the lazy one opens.
	if f, err := tensorfile.OpenNPZ(p); err == nil {
		f.Close()
		t.Fatal("the checked open took a flipped byte")
	}
	f, err := tensorfile.OpenNPZ(p, tensorfile.LazyMappedCRC())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ta, _ := f.Tensor("a")
	tb, _ := f.Tensor("b")
	for _, tn := range []*tensorfile.Tensor{ta, tb} {
		if !tn.Mapped() || tn.CRCChecked() {
			t.Fatalf("%v: mapped %v, CRC checked %v before any use", tn, tn.Mapped(), tn.CRCChecked())
		}
	}
	// a serves, checked on its first use.
	x, err := dlpack.From(ta)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := dlpack.ReadOnlySlice[float64](x)
	if err != nil || !slices.Equal(xs, a) {
		t.Errorf("a: %v, %v", xs, err)
	}
	x.Close()
	if !ta.CRCChecked() {
		t.Error("a: not CRC checked after its first use")
	}
	// b fails every use with the checksum error, and exports nothing.
	_, err = dlpack.From(tb)
	wantChecksumErr(t, err, "b.npy", good, flipped)
	_, err = dlpack.From(tb)
	wantChecksumErr(t, err, "b.npy", good, flipped)
	_, err = tb.CopyTo(make([]byte, tb.NBytes()))
	wantChecksumErr(t, err, "b.npy", good, flipped)
	if tb.CRCChecked() {
		t.Error("b: CRC checked though it failed")
	}

	// Both options at once are refused.
	if g, err := tensorfile.OpenNPZ(p, tensorfile.SkipMappedCRC(), tensorfile.LazyMappedCRC()); err == nil {
		g.Close()
		t.Error("SkipMappedCRC and LazyMappedCRC were both taken")
	}

	// The intact archive, lazily: concurrent first uses all serve, the
	// check done once; CopyTo is a first use too.
	g, err := tensorfile.OpenNPZ(writeTemp(t, "ab.npz", archive.Bytes()), tensorfile.LazyMappedCRC())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ga, _ := g.Tensor("a")
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			x, err := dlpack.From(ga)
			if err == nil {
				x.Close()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	gb, _ := g.Tensor("b")
	got := make([]byte, gb.NBytes())
	if n, err := gb.CopyTo(got); err != nil || n != len(bData) || !bytes.Equal(got, bData) {
		t.Errorf("b: CopyTo %d, %v", n, err)
	}
	if !ga.CRCChecked() || !gb.CRCChecked() {
		t.Errorf("CRC checked: a %v, b %v", ga.CRCChecked(), gb.CRCChecked())
	}
}

// A lazily checked member whose file is cut short before its first use
// fails that use with ErrTruncated: the check reads the mapping under the
// same guard as CopyTo.
func TestNPZLazyCRCTruncated(t *testing.T) {
	noLiveMappings(t)
	big := make([]float64, 1<<16) // 512 KiB: pages past the cut
	for i := range big {
		big[i] = float64(i)
	}
	var archive bytes.Buffer
	if err := tensorfile.WriteNPZ(&archive, []tensorfile.Named{{Name: "big", Tensor: dlpack.NewArray(big, nil)}}, false); err != nil {
		t.Fatal(err)
	}
	p := writeTemp(t, "big.npz", archive.Bytes())
	f, err := tensorfile.OpenNPZ(p, tensorfile.LazyMappedCRC())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	tn, _ := f.Tensor("big")
	if _, err := dlpack.From(tn); !errors.Is(err, tensorfile.ErrTruncated) {
		t.Fatalf("got %v, want ErrTruncated", err)
	}
	if _, err := tn.CopyTo(make([]byte, 8)); !errors.Is(err, tensorfile.ErrTruncated) {
		t.Fatalf("CopyTo: got %v, want ErrTruncated", err)
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
