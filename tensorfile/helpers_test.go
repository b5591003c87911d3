package tensorfile_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// npyBytes is a .npy file with header dict hdr (padded as NumPy pads) and
// the given data.
func npyBytes(hdr string, data []byte) []byte {
	return npyVersion(1, hdr, data)
}

func npyVersion(major byte, hdr string, data []byte) []byte {
	pre := 10
	if major > 1 {
		pre = 12
	}
	total := (pre + len(hdr) + 1 + 63) / 64 * 64
	hdr += strings.Repeat(" ", total-pre-len(hdr)-1) + "\n"
	b := make([]byte, pre, total+len(data))
	copy(b, "\x93NUMPY")
	b[6] = major
	if major == 1 {
		binary.LittleEndian.PutUint16(b[8:], uint16(len(hdr)))
	} else {
		binary.LittleEndian.PutUint32(b[8:], uint32(len(hdr)))
	}
	b = append(b, hdr...)
	return append(b, data...)
}

// stBytes is a safetensors file with the given JSON header (padded with
// spaces to 8 bytes) and data section.
func stBytes(js string, data []byte) []byte {
	for (len(js))%8 != 0 {
		js += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, data...)
}

// npzBytes is a zip archive of the given members (stored or deflated).
func npzBytes(members map[string][]byte, method uint16) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(members) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			panic(err)
		}
		w.Write(members[name])
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noLiveMappings fails the test if it ends with a mapping still mapped.
func noLiveMappings(t testing.TB) {
	t.Helper()
	before := tensorfile.LiveMappings()
	t.Cleanup(func() {
		if n := tensorfile.LiveMappings(); n != before {
			t.Errorf("live mappings: %d at the start, %d at the end", before, n)
		}
	})
}
