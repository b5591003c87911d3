//go:build unix

package tensorfile

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmapFile maps the whole of f, shared, read-only or read-write.
func mmapFile(f *os.File, size int64, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	h := hintFor(size)
	hint := *(*unsafe.Pointer)(unsafe.Pointer(&h)) // an address, not Go memory
	p, err := unix.MmapPtr(int(f.Fd()), 0, hint, uintptr(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), size), nil
}

func munmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// Large mappings get an address hint: successive 1 GiB-aligned slots of
// a part of the address space nothing else uses (hintBase, where the
// platform has one). Mapping and unmapping a large range next to other
// mappings makes the kernel walk page tables it shares with them, a cost
// that grows with the size of the range (measured: 1 GiB costs about twice
// 4 KiB); in an empty region it does not. A hint never moves or replaces
// anything: the kernel ignores it when the range is taken, and the mapping
// goes where it would have gone.
const (
	largeMapping = 64 << 20
	hintSlot     = 1 << 30
)

var hintNext atomic.Uintptr

func hintFor(size int64) uintptr {
	if hintBase == 0 || size < largeMapping || uint64(size) > hintSpan/4 {
		return 0
	}
	step := (uintptr(size) + hintSlot - 1) / hintSlot * hintSlot
	off := (hintNext.Add(step) - step) % hintSpan
	if off+step > hintSpan {
		off = 0
	}
	return hintBase + off
}
