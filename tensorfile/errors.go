package tensorfile

import (
	"errors"

	"github.com/godlpack/dlpack"
)

// Sentinel errors. Every error about a file's contents wraps exactly one of
// them (test with errors.Is) and is a *dlpack.FieldError naming the field
// and its value, such as
//
//	tensorfile: malformed header: header.shape = "(3)" (a one-element tuple needs a trailing comma)
var (
	// ErrFormat: the file is not of the format it is opened as: bad magic,
	// unknown version, a header that does not parse (dict literal or JSON),
	// missing, repeated or unknown keys; a path that is not a regular
	// file (a directory, a named pipe, a device).
	ErrFormat = errors.New("tensorfile: malformed header")
	// ErrTruncated: the file is shorter (or longer) than its header says,
	// or a header length or data offset points past its end.
	ErrTruncated = errors.New("tensorfile: file size disagrees with its header")
	// ErrLayout: tensor offsets that overlap, leave gaps, or disagree with
	// shape x dtype; shapes whose element count or byte size overflows;
	// more than dlpack.MaxNDim dimensions.
	ErrLayout = errors.New("tensorfile: invalid tensor layout")
	// ErrDType: a data type this package cannot express as a DLPack tensor:
	// unknown names, NumPy object and structured dtypes, strings,
	// datetimes, sub-byte safetensors types.
	ErrDType = errors.New("tensorfile: unsupported data type")
	// ErrByteOrder: big-endian data, which cannot be shared with a
	// little-endian consumer without a copy (ReadNPY converts it).
	ErrByteOrder = errors.New("tensorfile: big-endian data cannot be mapped")
	// ErrNotFound: no tensor of that name in the file.
	ErrNotFound = errors.New("tensorfile: no such tensor")
	// ErrUnsupported: the platform cannot map files (not a Unix system),
	// or take file leases (not Linux).
	ErrUnsupported = errors.New("tensorfile: memory mapping is not supported on this platform")
	// ErrLease: File.Lease could not take a lease: see its documentation
	// for the conditions the kernel sets.
	ErrLease = errors.New("tensorfile: cannot lease the file")
)

func fieldErr(sentinel error, field string, value any, why string) error {
	return &dlpack.FieldError{Field: field, Value: value, Err: sentinel, Why: why}
}

// renamed returns err, a *dlpack.FieldError, with its field replaced.
func renamed(err error, field string) error {
	if fe, ok := err.(*dlpack.FieldError); ok {
		c := *fe
		c.Field = field
		return &c
	}
	return err
}

// ErrChecksum is the error of bytes that disagree with the checksum
// their format records for them: an .npz member and its CRC-32.
var ErrChecksum = errors.New("tensorfile: checksum mismatch")
