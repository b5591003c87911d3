package dlgrpc

import (
	"context"
	"errors"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrLimit: a configured limit was reached (MaxMessageBytes,
	// MaxTensorBytes, MaxConcurrentCalls, or a service's own). A server
	// answers codes.ResourceExhausted.
	ErrLimit = errors.New("limit exceeded")
	// ErrMalformed: a message that breaks protobuf's wire format (a
	// varint of more than ten bytes or whose tenth byte is above 1, a
	// length beyond the message, a field number out of range, an
	// unknown wire type, an unterminated group): exactly the messages
	// protobuf's own decoder refuses. A server answers
	// codes.InvalidArgument.
	ErrMalformed = errors.New("malformed message")
	// ErrPanic: code of the user's (a hook, a model, a release
	// callback) panicked; the panic was recovered and reported to the
	// Logger, and that call alone failed. A server answers codes.Internal.
	ErrPanic = errors.New("recovered from a panic")
	// ErrTruncated: a tensor in a file mapping (a tensorfile tensor, a
	// shared-memory region) whose file another process cut short; the
	// lost pages cannot be read. It is tensorfile.ErrTruncated. Sending
	// such a tensor fails (a server answers codes.Internal) instead of
	// killing the process.
	ErrTruncated = tensorfile.ErrTruncated
)

// Status gives err the gRPC status a server answers it with: a status
// (or an error wrapping one) as it is; ErrLimit codes.ResourceExhausted;
// ErrMalformed, dlpack.ErrShape and the service's own invalid sentinels
// codes.InvalidArgument; a cancelled or expired context
// codes.Canceled or codes.DeadlineExceeded; anything else codes.Internal.
// The message is err's text.
func Status(err error, invalid ...error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrMalformed), errors.Is(err, dlpack.ErrShape), isAny(err, invalid):
		code = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
