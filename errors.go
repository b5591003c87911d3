package dlpack

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can test with errors.Is; most are *FieldError values that
// also name the offending field and value.
var (
	// ErrNilPointer: a nil managed-tensor pointer was passed, or a nil
	// producer or source (nil, or a nil pointer such as a nil *Array).
	ErrNilPointer = errors.New("dlpack: nil pointer")
	// ErrVersion: the managed tensor has a major version other than 1.
	ErrVersion = errors.New("dlpack: unsupported DLPack major version")
	// ErrNDim: ndim is negative or above MaxNDim.
	ErrNDim = errors.New("dlpack: invalid ndim")
	// ErrShape: the shape is NULL where it is required, or has a negative
	// dimension, or a Go-side shape does not fit the data.
	ErrShape = errors.New("dlpack: invalid shape")
	// ErrStrides: strides are NULL where the version requires them, or do
	// not fit the data.
	ErrStrides = errors.New("dlpack: invalid strides")
	// ErrDataType: unknown type code, wrong bit width for the code, or
	// zero lanes.
	ErrDataType = errors.New("dlpack: invalid data type")
	// ErrDevice: unknown device type or negative device id; or a CPU view
	// was asked of memory the CPU cannot read.
	ErrDevice = errors.New("dlpack: invalid device")
	// ErrNullData: data is NULL but the tensor has elements.
	ErrNullData = errors.New("dlpack: NULL data for a non-empty tensor")
	// ErrOverflow: a size, extent or address computation overflows.
	ErrOverflow = errors.New("dlpack: size overflow")
	// ErrFlags: flag bits this version of the package does not know.
	ErrFlags = errors.New("dlpack: unknown flags")
	// ErrReadOnly: a writable view of read-only data was requested (this
	// includes legacy tensors, unless the caller opted in).
	ErrReadOnly = errors.New("dlpack: tensor is read-only")
	// ErrLayout: the requested view needs a compact row-major tensor.
	ErrLayout = errors.New("dlpack: tensor is not compact row-major")
	// ErrTypeMismatch: the Go element type does not match the tensor's
	// data type.
	ErrTypeMismatch = errors.New("dlpack: element type mismatch")
	// ErrAlignment: the first element is not aligned for the Go element type.
	ErrAlignment = errors.New("dlpack: misaligned data")
	// ErrRequirement: the tensor does not meet a requirement stated in an
	// ImportOption (data type, ndim, device, writability).
	ErrRequirement = errors.New("dlpack: tensor does not meet requirement")
	// ErrClosed: the tensor was already closed (or its scope has ended).
	ErrClosed = errors.New("dlpack: tensor is closed")
	// ErrExchangeAPI: an exchange-API table is missing, of a version this
	// package cannot use, lacks an entry, or an entry reported failure.
	ErrExchangeAPI = errors.New("dlpack: exchange API")
	// ErrCorrupt: the tensor claims to be an export of this package (it has
	// our deleter) but does not match what was exported.
	ErrCorrupt = errors.New("dlpack: tensor does not match its export record")
	// ErrNoMemory: C memory for a managed struct or buffer could not be
	// allocated.
	ErrNoMemory = errors.New("dlpack: out of C memory")
	// ErrRequest: a producer cannot honour a part of a consumer's Request
	// (a stream for CPU data, an unknown copy mode); the FieldError names
	// the part ("request.stream"). Device conflicts wrap ErrDevice and
	// read-only conflicts ErrReadOnly instead.
	ErrRequest = errors.New("dlpack: producer cannot honour the request")
	// ErrBorrowed: a borrowed (scoped) import was to be handed on; it ends
	// with its scope. Import it owned to hand it on.
	ErrBorrowed = errors.New("dlpack: a borrowed tensor cannot outlive its scope")
	// ErrCgoRequired: the operation needs cgo and the package was built
	// with CGO_ENABLED=0.
	ErrCgoRequired = errors.New("dlpack: this operation requires cgo (built with CGO_ENABLED=0)")
)

// FieldError reports which field of a tensor failed a check and its value.
// Unwrap returns the sentinel (ErrShape, ErrDataType, ...).
type FieldError struct {
	Field string // such as "dl_tensor.shape[2]" or "version.major"
	Value any    // the offending value
	Err   error  // the sentinel
	Why   string // a short explanation, may be empty
}

// Error formats the sentinel, field, value and explanation, such as
// "dlpack: invalid shape: dl_tensor.shape[1] = -3 (negative dimension)".
func (e *FieldError) Error() string {
	msg := fmt.Sprintf("%v: %s = %v", e.Err, e.Field, e.Value)
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
}

// Unwrap returns the sentinel, for errors.Is.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(sentinel error, field string, value any, why string) error {
	return &FieldError{Field: field, Value: value, Err: sentinel, Why: why}
}
