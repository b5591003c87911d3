package dloip

import (
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// The protocol's datatypes that are tensors of fixed-width numbers or
// bools, and their DLPack element types. BYTES is the protocol's one other
// datatype; it is a list of byte strings, not a tensor, and is refused.
var datatypes = []struct {
	name string
	dt   dlpack.DataType
}{
	{"BOOL", dlpack.Bool},
	{"UINT8", dlpack.Uint8}, {"UINT16", dlpack.Uint16}, {"UINT32", dlpack.Uint32}, {"UINT64", dlpack.Uint64},
	{"INT8", dlpack.Int8}, {"INT16", dlpack.Int16}, {"INT32", dlpack.Int32}, {"INT64", dlpack.Int64},
	{"FP16", dlpack.Float16}, {"BF16", dlpack.BFloat16}, {"FP32", dlpack.Float32}, {"FP64", dlpack.Float64},
}

// Datatypes lists the protocol datatypes the bridge carries, in the
// protocol's order.
func Datatypes() []string {
	out := make([]string, len(datatypes))
	for i, d := range datatypes {
		out[i] = d.name
	}
	return out
}

// ParseDatatype gives the element type of a protocol datatype ("FP32",
// "BOOL", ...). BYTES and names the protocol does not define fail with
// ErrDatatype.
func ParseDatatype(s string) (dlpack.DataType, error) {
	for _, d := range datatypes {
		if d.name == s {
			return d.dt, nil
		}
	}
	why := "not a datatype of the protocol"
	if s == "BYTES" {
		why = "BYTES is a list of byte strings, not a tensor"
	}
	return dlpack.DataType{}, &dlpack.FieldError{Field: "datatype", Value: s, Err: ErrDatatype, Why: why}
}

// DatatypeOf gives the protocol datatype of an element type; one the
// protocol has no name for fails with ErrDatatype.
func DatatypeOf(dt dlpack.DataType) (string, error) {
	for _, d := range datatypes {
		if d.dt == dt {
			return d.name, nil
		}
	}
	return "", &dlpack.FieldError{Field: "dtype", Value: dt, Err: ErrDatatype,
		Why: fmt.Sprintf("the protocol has datatypes for %v only", Datatypes())}
}

// byteSize is the byte size of a tensor of dt and shape, checked: every
// dimension non-negative, at most dlpack.MaxNDim of them, no overflow
// (ErrShape).
func byteSize(dt dlpack.DataType, shape []int64) (int64, error) { return dlgrpc.ByteSize(dt, shape) }
