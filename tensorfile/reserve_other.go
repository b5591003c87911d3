//go:build !linux

package tensorfile

import "os"

// reserve extends fd to size bytes, sparse: a file system that runs out
// of room faults the write through the mapping that needed the page.
func reserve(fd *os.File, size int64) error { return fd.Truncate(size) }
