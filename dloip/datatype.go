package dloip

import (
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// The protocol's datatypes that are tensors of fixed-width numbers or
// bools, and their DLPack element types. BYTES, the protocol's one other
// datatype, is a tensor of byte strings (BytesTensor, Tensor.Elements)
// with no DLPack element type.
var datatypes = []struct {
	name string
	dt   dlpack.DataType
}{
	{"BOOL", dlpack.Bool},
	{"UINT8", dlpack.Uint8}, {"UINT16", dlpack.Uint16}, {"UINT32", dlpack.Uint32}, {"UINT64", dlpack.Uint64},
	{"INT8", dlpack.Int8}, {"INT16", dlpack.Int16}, {"INT32", dlpack.Int32}, {"INT64", dlpack.Int64},
	{"FP16", dlpack.Float16}, {"BF16", dlpack.BFloat16}, {"FP32", dlpack.Float32}, {"FP64", dlpack.Float64},
}

// Datatypes lists the protocol datatypes that have a DLPack element
// type, in the protocol's order; the bridge carries BYTES too.
func Datatypes() []string {
	out := make([]string, len(datatypes))
	for i, d := range datatypes {
		out[i] = d.name
	}
	return out
}

// ParseDatatype gives the DLPack element type of a protocol datatype
// ("FP32", "BOOL", ...). BYTES (which has none) and names the protocol
// does not define fail with ErrDatatype.
func ParseDatatype(s string) (dlpack.DataType, error) {
	for _, d := range datatypes {
		if d.name == s {
			return d.dt, nil
		}
	}
	why := "not a datatype of the protocol"
	if s == BYTES {
		why = "BYTES, byte strings, has no DLPack element type"
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

// checkDatatype is nil for a datatype the bridge carries: BYTES or one
// of Datatypes.
func checkDatatype(d string) error {
	if d == BYTES {
		return nil
	}
	_, err := ParseDatatype(d)
	return err
}

// minBytes is the byte size of a tensor of datatype and shape, checked
// (ErrShape); for BYTES, the least its elements take (4 bytes each).
func minBytes(datatype string, shape []int64) (int64, error) {
	if datatype == BYTES {
		n, err := elements(shape)
		if err != nil {
			return 0, err
		}
		if n > (1<<62)/4 {
			return 0, &dlpack.FieldError{Field: "shape", Value: shape, Err: ErrShape, Why: "the byte size overflows"}
		}
		return 4 * n, nil
	}
	dt, err := ParseDatatype(datatype)
	if err != nil {
		return 0, err
	}
	return byteSize(dt, shape)
}
