//go:build cgo

package dlonnx

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// LibRefs reports the references this package holds to the ONNX Runtime
// library (one per live value, session and Output).
func LibRefs() int { return libRefs() }

// NewValue makes an OrtValue over C memory through this package's C API
// route, for FromValue tests; the library must be open (a Session alive).
func NewValue(data unsafe.Pointer, nbytes uintptr, shape []int64, dt dlpack.DataType) (unsafe.Pointer, error) {
	k, err := kindFor(dt)
	if err != nil {
		return nil, err
	}
	return newRawValue(data, nbytes, shape, int(k.ort))
}
