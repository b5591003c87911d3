//go:build cgo

package dlonnx

// LibRefs reports the references this package holds to the ONNX Runtime
// library (one per live value, session and Output).
func LibRefs() int { return libRefs() }
