// This file holds the ABI mirror: field-for-field copies of the C structs
// in include/dlpack/dlpack.h. The build fails if any size or offset
// differs from the C compiler's (see cgo_bridge.go). They are plain data:
// behaviour lives on the safe types (Foreign, Buffer) and functions.
//
// Each mirror struct (and Device and DataType, which they nest) opens with
// a structs.HostLayout field: the Go spec leaves struct layout to the
// implementation, and the marker is what binds Go to the C ABI's order and
// padding, so a future compiler cannot reorder or repad them. The marker
// binds only the struct that holds it, hence one in each. Being zero-sized
// and first, it adds no bytes; it does mean these structs are written with
// field names (Device{Type: CUDA, ID: 1}), as vet asks anyway.

package dlpack

import (
	"strconv"
	"structs"
	"unsafe"
)

// The DLPack ABI version this package implements and exports.
const (
	MajorVersion = 1
	MinorVersion = 3
)

// Version mirrors DLPackVersion. Only a major version equal to MajorVersion
// can be read; any minor version is accepted, and values a newer minor adds
// (device types, type codes, flags) are rejected at validation.
type Version struct {
	_ structs.HostLayout

	Major uint32
	Minor uint32
}

// CurrentVersion is the version this package writes into its exports.
var CurrentVersion = Version{Major: MajorVersion, Minor: MinorVersion}

// Flags mirrors DLManagedTensorVersioned.flags.
type Flags uint64

// The flag bits defined by DLPack 1.3.
const (
	// FlagReadOnly: the data must not be written.
	FlagReadOnly Flags = 1 << 0
	// FlagIsCopied: the producer made a copy that the consumer alone owns.
	FlagIsCopied Flags = 1 << 1
	// FlagSubbyteTypePadded: each element of a sub-byte type (fp4, fp6)
	// occupies a whole byte instead of being packed.
	FlagSubbyteTypePadded Flags = 1 << 2

	knownFlags = FlagReadOnly | FlagIsCopied | FlagSubbyteTypePadded
)

// Tensor mirrors DLTensor: a plain descriptor with no ownership. The first
// element is at Data + ByteOffset; Strides count elements. Data is a uintptr
// because it may be a device address; Shape and Strides are host pointers
// or nil.
type Tensor struct {
	_ structs.HostLayout

	Data       uintptr
	Device     Device
	NDim       int32
	DType      DataType
	Shape      *int64
	Strides    *int64
	ByteOffset uint64
}

// ManagedTensor mirrors the legacy (pre-1.0) DLManagedTensor, which carries
// no version and no flags. Deleter holds a C function pointer.
type ManagedTensor struct {
	_ structs.HostLayout

	DLTensor   Tensor
	ManagerCtx uintptr
	Deleter    uintptr
}

// ManagedTensorVersioned mirrors DLManagedTensorVersioned (DLPack 1.0 and
// later). Deleter holds a C function pointer.
type ManagedTensorVersioned struct {
	_ structs.HostLayout

	Version    Version
	ManagerCtx uintptr
	Deleter    uintptr
	Flags      Flags
	DLTensor   Tensor
}

// ExchangeAPIHeader mirrors DLPackExchangeAPIHeader. PrevAPI is the address
// of an older table (or 0).
type ExchangeAPIHeader struct {
	_ structs.HostLayout

	Version Version
	PrevAPI uintptr
}

// ExchangeAPI mirrors the DLPack 1.3 DLPackExchangeAPI table. Every entry is
// a C function pointer (or 0); see include/dlpack/dlpack.h for signatures.
type ExchangeAPI struct {
	_ structs.HostLayout

	Header                          ExchangeAPIHeader
	ManagedTensorAllocator          uintptr
	ManagedTensorFromPyObjectNoSync uintptr
	ManagedTensorToPyObjectNoSync   uintptr
	DLTensorFromPyObjectNoSync      uintptr
	CurrentWorkStream               uintptr
}

// String returns the flags as a list of names, such as "READ_ONLY|IS_COPIED".
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	s := ""
	add := func(name string) {
		if s != "" {
			s += "|"
		}
		s += name
	}
	if f&FlagReadOnly != 0 {
		add("READ_ONLY")
	}
	if f&FlagIsCopied != 0 {
		add("IS_COPIED")
	}
	if f&FlagSubbyteTypePadded != 0 {
		add("IS_SUBBYTE_TYPE_PADDED")
	}
	if rest := f &^ knownFlags; rest != 0 {
		add("0x" + strconv.FormatUint(uint64(rest), 16))
	}
	return s
}

// String returns "major.minor".
func (v Version) String() string {
	return strconv.FormatUint(uint64(v.Major), 10) + "." + strconv.FormatUint(uint64(v.Minor), 10)
}

// Close calls m's deleter, if it has one, with m: what a holder of the
// tensor that does not hand it on does, such as the caller of Export
// whose C consumer refused it. Close at most once, and never after handing
// m to a consumer (which then owns it): the deleter frees the struct. For
// a tensor this package exported, a second call is refused and counted
// (Stats.BadReleases) as long as the struct was not reused by a later
// export. A nil m is a no-op. It returns nil (a deleter reports nothing);
// the error is there so that every owner closes the same way (io.Closer).
func (m *ManagedTensorVersioned) Close() error {
	if m != nil {
		callDeleter(m.Deleter, uintptr(unsafe.Pointer(m)))
	}
	return nil
}

// Close calls m's deleter, if it has one, with m: ManagedTensorVersioned's
// Close for the legacy struct, with the same rules.
func (m *ManagedTensor) Close() error {
	if m != nil {
		callDeleter(m.Deleter, uintptr(unsafe.Pointer(m)))
	}
	return nil
}
