package dlflight

import (
	"errors"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

var (
	// ErrInvalid: a received schema or record batch is not a tensor
	// stream (extension metadata that disagrees with the storage, nulls,
	// a shape whose product overflows, a wrong value type, ...). A server
	// answers codes.InvalidArgument.
	ErrInvalid = errors.New("dlflight: invalid tensor stream")
	// ErrType: the element type has no Arrow fixed_shape_tensor form.
	ErrType = errors.New("dlflight: unsupported element type")
	// ErrShape: the shape has no fixed_shape_tensor form (a zero inner
	// dimension, too many dimensions, a product beyond int64).
	ErrShape = dlpack.ErrShape
	// ErrName: a tensor name that is not valid UTF-8 (Flight carries
	// names as protobuf strings). A server answers codes.InvalidArgument.
	ErrName = errors.New("dlflight: invalid tensor name")
	// ErrLimit: a configured limit was reached (MaxMessageBytes,
	// MaxTensorBytes, MaxTensors, MaxStoredBytes, MaxConcurrentCalls). It
	// is dlgrpc.ErrLimit. A server answers codes.ResourceExhausted.
	ErrLimit = dlgrpc.ErrLimit
	// ErrLocation: a FlightInfo named a location that
	// ClientOptions.TrustLocation does not trust (by default, any
	// address but the one the client was dialled with); Get did not dial
	// it.
	ErrLocation = errors.New("dlflight: location not trusted")
	// ErrStalled: a stream of Get received nothing for
	// ClientOptions.StallTimeout; Get tried the range's next replica, if
	// it had one.
	ErrStalled = errors.New("dlflight: stream stalled")
)

// ErrTruncated is the error of a tensor in a file mapping (a tensorfile
// tensor) whose file another process cut short; the lost pages cannot be
// read. It is dlgrpc.ErrTruncated (tensorfile.ErrTruncated). A server
// answers codes.Internal.
var ErrTruncated = dlgrpc.ErrTruncated
