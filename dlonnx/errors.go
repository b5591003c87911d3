package dlonnx

import (
	"errors"
	"fmt"

	"github.com/godlpack/dlpack"
)

// ErrNotLoaded is returned when no ONNX Runtime library is loaded in the
// process (call ort.SetSharedLibraryPath and ort.InitializeEnvironment
// first), or the one loaded lacks C API version 24.
var ErrNotLoaded = errors.New("dlonnx: ONNX Runtime is not loaded")

// ErrRuntime wraps an error ONNX Runtime reported.
var ErrRuntime = errors.New("dlonnx: ONNX Runtime")

// ErrInput is wrapped by every error of CheckInputs (and so of Run and
// RunInto): an input that does not match the model, with the dlpack
// sentinel of what differs (dlpack.ErrDataType, dlpack.ErrNDim,
// dlpack.ErrShape).
var ErrInput = errors.New("dlonnx: input does not match the model")

// InputError names the input (and the dimension, when one is at fault)
// that does not match the model. errors.Is finds both ErrInput and Err.
type InputError struct {
	Input string // the input's name in the model
	Dim   int    // the dimension at fault, -1 for none
	Want  any    // what the model declares
	Got   any    // what the input is
	Err   error  // dlpack.ErrDataType, dlpack.ErrNDim or dlpack.ErrShape
	Why   string // a short explanation, may be empty
}

// Error names the input, the dimension, what it is and what the model wants.
func (e *InputError) Error() string {
	where := fmt.Sprintf("input %q", e.Input)
	if e.Dim >= 0 {
		where += fmt.Sprintf(" dimension %d", e.Dim)
	}
	msg := fmt.Sprintf("%v: %s: %v, the model wants %v", ErrInput, where, e.Got, e.Want)
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
}

// Unwrap returns ErrInput and the dlpack sentinel.
func (e *InputError) Unwrap() []error { return []error{ErrInput, e.Err} }

// Info describes an input or output of a model.
type Info struct {
	Name  string
	DType dlpack.DataType
	// Shape is the declared shape: -1 for a dimension the model leaves
	// open (named in Dims or not).
	Shape []int64
	// Dims holds the symbolic name of each dimension ("" for none):
	// dimensions that share a name are equal in every run.
	Dims []string
	elem int
}
