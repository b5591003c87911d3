package tensorfile_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// heapAllocs is the number of bytes allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// writeBigHeader writes a safetensors file whose header lists tensors of
// 64 bytes, entry(i, begin) each, until it is as long as it can be under
// size bytes, with a sparse data section; it returns the path, the
// header's length and the number of tensors.
func writeBigHeader(t *testing.T, size int, entry func(i int, begin int64) string) (string, int, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.safetensors")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := bufio.NewWriter(fh)
	w.Write(make([]byte, 8))
	n, count := 1, 0
	w.WriteByte('{')
	for {
		e := entry(count, int64(count)*64)
		if n+len(e)+2 > size {
			break
		}
		if count > 0 {
			w.WriteByte(',')
			n++
		}
		w.WriteString(e)
		n += len(e)
		count++
	}
	w.WriteByte('}')
	n++
	for ; n%8 != 0; n++ {
		w.WriteByte(' ')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(n)), 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(8 + int64(n) + int64(count)*64); err != nil {
		t.Fatal(err)
	}
	return path, n, count
}

// TestSafetensorsHeaderMemory: opening a file whose header is as long as
// OpenSafetensors accepts, 100 MB, allocates less than twice the header's
// size in all (so it never holds more than that): the header is read in
// 64 KiB chunks and never held whole, and what is kept is what the File
// keeps (its tensors, their names and shapes). Two headers: a model's
// (names like model.layers.N.mlp.weight_M, a million tensors) and one of
// short names (1.4 million tensors). Before the header was read in
// chunks, they took 5.08 and 5.78 times their size. Under the race
// detector or the address sanitizer the headers are of 10 MB: the ratio
// is the same.
func TestSafetensorsHeaderMemory(t *testing.T) {
	noLiveMappings(t)
	size := tensorfile.MaxSafetensorsHeader
	if instrumented {
		size /= 10
	}
	for _, c := range []struct {
		what  string
		name  func(i int) string
		shape string
	}{
		{"model", func(i int) string { return fmt.Sprintf("model.layers.%d.mlp.weight_%d", i/10, i%10) }, "[4,4]"},
		{"short names", func(i int) string { return fmt.Sprintf("%x", i) }, "[16]"},
	} {
		path, n, count := writeBigHeader(t, size, func(i int, begin int64) string {
			return fmt.Sprintf(`%q:{"dtype":"F32","shape":%s,"data_offsets":[%d,%d]}`, c.name(i), c.shape, begin, begin+64)
		})
		before := heapAllocs()
		f, err := tensorfile.OpenSafetensors(path)
		allocs := heapAllocs() - before
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if ts := f.Tensors(); len(ts) != count || ts[count-1].Name() != c.name(count-1) || ts[count-1].NBytes() != 64 {
			t.Errorf("%s: %d tensors, the last %v; want %d, the last %q", c.what, len(ts), ts[len(ts)-1], count, c.name(count-1))
		}
		f.Close()
		os.Remove(path)
		ratio := float64(allocs) / float64(n)
		t.Logf("%s: a header of %d bytes listing %d tensors: %d bytes allocated to open it, %.2f times the header", c.what, n, count, allocs, ratio)
		if ratio > 2 {
			t.Errorf("%s: opening a %d-byte header allocated %d bytes, %.2f times its size (want at most 2)", c.what, n, allocs, ratio)
		}
	}
}
