//go:build linux && (amd64 || arm64)

package tensorfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Large mappings land in distinct 1 GiB-aligned slots of the hint region;
// small ones where the kernel puts them.
func TestLargeMappingsGetHintSlots(t *testing.T) {
	dir := t.TempDir()
	open := func(name string, size int64) *File {
		p := filepath.Join(dir, name)
		b := npyPreamble("|u1", false, []int64{size})
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, int64(len(b))+size); err != nil {
			t.Fatal(err)
		}
		f, err := OpenNPY(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b, small := open("a.npy", 128<<20), open("b.npy", 128<<20), open("s.npy", 1<<10)
	defer a.Close()
	defer b.Close()
	defer small.Close()
	pa, na := a.MappedRange()
	pb, _ := b.MappedRange()
	ps, _ := small.MappedRange()
	for _, p := range []uintptr{pa, pb} {
		if p < hintBase || p >= hintBase+hintSpan || (p-hintBase)%hintSlot != 0 {
			t.Errorf("large mapping at %#x, outside the hint slots [%#x, +%#x)", p, uintptr(hintBase), uintptr(hintSpan))
		}
	}
	if pa == pb || (pb > pa && pb < pa+uintptr(na)) || (pa > pb && pa < pb+uintptr(na)) {
		t.Errorf("mappings overlap: %#x and %#x", pa, pb)
	}
	if ps >= hintBase && ps < hintBase+hintSpan {
		t.Errorf("a small mapping got a hint slot: %#x", ps)
	}
	// The slot holds the file: the header reads back through the mapping.
	if string(a.m.data[1:6]) != "NUMPY" {
		t.Errorf("mapping at %#x does not hold the file", pa)
	}
}
