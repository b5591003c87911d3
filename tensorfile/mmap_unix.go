//go:build unix

package tensorfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps the whole of f, shared, read-only or read-write.
func mmapFile(f *os.File, size int64, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), prot, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }
