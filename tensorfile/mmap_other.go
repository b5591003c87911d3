//go:build !unix

package tensorfile

import "os"

func mmapFile(f *os.File, size int64, writable bool) ([]byte, error) { return nil, ErrUnsupported }

func munmap(b []byte) error { return ErrUnsupported }
