package tensorfile

import "io"

// newZipLZMAReader returns a reader of the bytes of the LZMA member e.
func newZipLZMAReader(src io.Reader, e *zipEntry) (io.Reader, error) {
	return nil, zipErr(e.field+" method", e.method, "LZMA members are not supported")
}
