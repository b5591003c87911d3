package tensorfile

import (
	"bytes"

	"github.com/godlpack/dlpack"
)

// Unmaps returns how many mappings have been unmapped so far.
func Unmaps() int64 { return unmaps.Load() }

// RowMajor returns the elements of f in row-major order, as bytes.
func RowMajor(f dlpack.Foreign) ([]byte, error) {
	var b bytes.Buffer
	err := writeElements(&b, f)
	return b.Bytes(), err
}

// SetHookBeforeData sets the hook copyNPY runs between header and data.
func SetHookBeforeData(f func()) { testHookBeforeData = f }

// DecodeZipLZMA decodes the data of a zip LZMA member of size bytes,
// flagged as ending with the end marker or not.
var DecodeZipLZMA = decodeLZMA
