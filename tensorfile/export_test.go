package tensorfile

import (
	"bytes"

	"github.com/godlpack/dlpack"
)

// Test hooks.
var (
	ParseNPYHeader   = func(b []byte) error { _, err := parseNPYHeader(b); return err }
	ParseSafetensors = func(b []byte) error { _, err := parseSafetensors(b); return err }
	NPYPreamble      = npyPreamble
)

// Unmaps returns how many mappings have been unmapped so far.
func Unmaps() int64 { return unmaps.Load() }

// RowMajor returns the elements of f in row-major order, as bytes.
func RowMajor(f dlpack.Foreign) ([]byte, error) {
	var b bytes.Buffer
	err := writeElements(&b, f)
	return b.Bytes(), err
}
