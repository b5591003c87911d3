package dloip

import (
	"errors"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

var (
	// ErrInvalid: a request or response that breaks the protocol (a byte
	// length that is not the shape times the element size, raw contents
	// for only some inputs, both typed and raw contents for one input,
	// a count of typed values that is not the shape's, missing, extra or
	// duplicated input names, an output the model does not have, an
	// output asked for in shared memory that the server did not write
	// there). A server answers codes.InvalidArgument naming the input and
	// the value. A message that breaks protobuf's wire format is
	// dlgrpc.ErrMalformed (codes.InvalidArgument too).
	ErrInvalid = errors.New("dloip: invalid inference message")
	// ErrDatatype: a datatype the bridge does not carry: BYTES (a list of
	// byte strings, not a tensor) or a name the protocol does not define;
	// or, sending, an element type that has no OIP datatype.
	// A server answers codes.InvalidArgument.
	ErrDatatype = errors.New("dloip: unsupported datatype")
	// ErrShape: a negative dimension (other than -1 in metadata), more
	// than dlpack.MaxNDim dimensions, or a shape whose byte size
	// overflows. It is dlpack.ErrShape. A server answers
	// codes.InvalidArgument.
	ErrShape = dlpack.ErrShape
	// ErrLimit: a configured limit was reached (MaxMessageBytes,
	// MaxTensorBytes, MaxConcurrentCalls, MaxRegions). It is
	// dlgrpc.ErrLimit. A server answers codes.ResourceExhausted.
	ErrLimit = dlgrpc.ErrLimit
	// ErrNotFound: a model the server does not serve. A server answers
	// codes.NotFound.
	ErrNotFound = errors.New("dloip: no such model")
	// ErrTruncated: a tensor in a file mapping (a tensorfile tensor, a
	// shared-memory region) whose file another process cut short; the
	// lost pages cannot be read. It is dlgrpc.ErrTruncated
	// (tensorfile.ErrTruncated). Sending such a tensor fails (a server
	// answers codes.Internal) instead of killing the process.
	ErrTruncated = dlgrpc.ErrTruncated
)

// errModel: a model's output that breaks its own metadata (a server
// answers codes.Internal: the fault is the server's, not the caller's).
var errModel = errors.New("dloip: the model's output breaks its metadata")
