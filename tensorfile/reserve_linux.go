package tensorfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// reserve extends fd to size bytes with its blocks allocated (fallocate),
// so that a file system without room answers ENOSPC here instead of a
// SIGBUS at the first write through the mapping (tmpfs, /dev/shm
// included). A size beyond the file system's free blocks is refused
// before anything is allocated. Where fallocate is not supported the file
// is extended sparse, as on other systems.
func reserve(fd *os.File, size int64) error {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(fd.Fd()), &st); err == nil && st.Bsize > 0 {
		if free := st.Bfree * uint64(st.Bsize); uint64(size) > free {
			return fmt.Errorf("tensorfile: %s: %d bytes do not fit in the %d free: %w", fd.Name(), size, free, syscall.ENOSPC)
		}
	}
	for {
		err := syscall.Fallocate(int(fd.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return fd.Truncate(size)
		}
		return &os.PathError{Op: "fallocate", Path: fd.Name(), Err: err}
	}
}
