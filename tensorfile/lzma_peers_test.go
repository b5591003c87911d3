package tensorfile_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// TestPeersLZMADamaged holds the LZMA decoder to liblzma (through
// Python's lzma, what zipfile and so np.load use) on the members of
// testdata/lzma damaged every way: cut at every byte, a bit flipped in
// every byte, every bit of the last 8 (where the range coder ends). Where liblzma decodes a whole stream of the member's size,
// the decoder reads the same bytes; where liblzma refuses (or the stream
// is not of that size), the decoder refuses too. A flip the stream does
// not reveal is the member CRC-32's to catch, in both.
func TestPeersLZMADamaged(t *testing.T) {
	python(t)
	paths, err := filepath.Glob("testdata/lzma/*.lzma")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	dir := t.TempDir()
	type member struct {
		what string
		data []byte
		size int
	}
	var members []member
	for _, p := range paths {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.ReadFile(strings.TrimSuffix(p, ".lzma") + ".bin")
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		members = append(members, member{name + " whole", in, len(out)})
		for cut := range len(in) {
			members = append(members, member{fmt.Sprintf("%s cut at %d", name, cut), in[:cut], len(out)})
		}
		for i := 9; i < len(in); i++ {
			bits := []byte{1 << (i % 8)}
			if i >= len(in)-8 { // the range coder's last bytes: every bit
				bits = []byte{1, 2, 4, 8, 16, 32, 64, 128}
			}
			for _, bit := range bits {
				b := bytes.Clone(in)
				b[i] ^= bit
				members = append(members, member{fmt.Sprintf("%s byte %d ^ %#x", name, i, bit), b, len(out)})
			}
		}
	}
	list := make([][2]any, len(members))
	for i, m := range members {
		name := fmt.Sprintf("%d.lzma", i)
		if err := os.WriteFile(filepath.Join(dir, name), m.data, 0o644); err != nil {
			t.Fatal(err)
		}
		list[i] = [2]any{name, m.size}
	}
	raw, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(dir, "lzma.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var peer []string
	if err := json.Unmarshal([]byte(runPython(t, "testdata/peers.py", "lzma", dir)), &peer); err != nil || len(peer) != len(members) {
		t.Fatalf("%d verdicts for %d members: %v", len(peer), len(members), err)
	}
	read, refused := 0, 0
	for i, m := range members {
		got, err := tensorfile.DecodeZipLZMA(m.data, uint64(m.size), true)
		sum := sha256.Sum256(got)
		peerReads := len(peer[i]) == 64 && !strings.Contains(peer[i], " ")
		switch {
		case peerReads && err != nil:
			t.Errorf("%s: liblzma reads it, the decoder: %v", m.what, err)
		case peerReads && hex.EncodeToString(sum[:]) != peer[i]:
			t.Errorf("%s: the decoder reads other bytes than liblzma", m.what)
		case !peerReads && err == nil:
			t.Errorf("%s: liblzma: %s; the decoder reads it", m.what, peer[i])
		case peerReads:
			read++
		default:
			refused++
		}
	}
	t.Logf("%d LZMA members, whole, cut and flipped: %d read by both, bit for bit, %d refused by both", len(members), read, refused)
}
