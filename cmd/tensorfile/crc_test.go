//go:build cgo

package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNPZCRC: a flipped byte in a mapped .npz member (WriteNPZ stores
// members aligned, so they are mapped) is shown as unchecked by inspect,
// found by inspect --verify, and refused by convert, which writes nothing:
// np.load raises BadZipFile on the same file.
func TestNPZCRC(t *testing.T) {
	dir, _, npz, _, _ := goFiles(t)
	b, err := os.ReadFile(npz)
	if err != nil {
		t.Fatal(err)
	}
	// w's first float32, 1.0, becomes 1.0000001: a value, not a header
	one := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))
	i := bytes.Index(b, one)
	if i < 0 {
		t.Fatal("1.0f not found in the archive")
	}
	b[i] ^= 1
	bad := filepath.Join(dir, "flipped.npz")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}

	rep, r := inspectJSON(t, npz)
	if r.code != 0 || len(rep.Files[0].Tensors) != 2 {
		t.Fatalf("inspect of the intact archive: exit %d, %+v", r.code, rep)
	}
	for _, tn := range rep.Files[0].Tensors {
		if !tn.Mapped || tn.CRC != "unchecked" {
			t.Errorf("intact %s: mapped %v, crc %q; want mapped, unchecked", tn.Name, tn.Mapped, tn.CRC)
		}
	}
	r = ok(t, "inspect", "--verify", npz)
	if !strings.Contains(r.stdout, "CRC-32") || strings.Contains(r.stdout, "unchecked") {
		t.Errorf("inspect --verify of the intact archive: want every member checked:\n%s", r.stdout)
	}

	// the flipped archive: mapped members are not read by a plain inspect...
	r = ok(t, "inspect", bad)
	if !strings.Contains(r.stdout, "unchecked") {
		t.Errorf("inspect of the flipped archive: want its members shown unchecked:\n%s", r.stdout)
	}
	// ...but --verify and convert read them and fail, naming the member and both CRCs
	for _, args := range [][]string{{"inspect", "--verify", bad}, {"convert", bad, filepath.Join(dir, "out.safetensors")}} {
		r = tf(t, args...)
		if r.code != 1 || !strings.Contains(r.stderr, `member "w.npy" CRC-32`) {
			t.Errorf("tensorfile %s: exit %d, want 1 naming the member's CRC-32:\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.safetensors")); !os.IsNotExist(err) {
		t.Errorf("convert of the flipped archive left an output: %v", err)
	}
}
