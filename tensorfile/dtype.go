package tensorfile

import (
	"strconv"

	"github.com/godlpack/dlpack"
)

// npyKinds maps a NumPy type character and item size to a DLPack type:
// every NumPy builtin dtype that DLPack can carry.
var npyKinds = map[byte]map[int]dlpack.DataType{
	'b': {1: dlpack.Bool},
	'i': {1: dlpack.Int8, 2: dlpack.Int16, 4: dlpack.Int32, 8: dlpack.Int64},
	'u': {1: dlpack.Uint8, 2: dlpack.Uint16, 4: dlpack.Uint32, 8: dlpack.Uint64},
	'f': {2: dlpack.Float16, 4: dlpack.Float32, 8: dlpack.Float64},
	'c': {8: dlpack.Complex64, 16: dlpack.Complex128},
}

// parseDescr reads a NumPy type string such as "<f8", "|b1" or ">i4". It
// returns the DLPack type and whether the data is big-endian.
func parseDescr(s string) (dlpack.DataType, bool, error) {
	const field = "header.descr"
	if len(s) < 2 || (s[0] != '<' && s[0] != '>' && s[0] != '|' && s[0] != '=') {
		return dlpack.DataType{}, false, fieldErr(ErrDType, field, s, "not a NumPy type string such as '<f8' (byte order '<', '>', '|' or '=', kind, size)")
	}
	order, kind, digits := s[0], s[1], s[2:]
	sizes, ok := npyKinds[kind]
	if !ok {
		why := "unknown type character"
		switch kind {
		case 'O':
			why = "object arrays hold Python objects, not data"
		case 'V':
			why = "void and structured dtypes are not supported"
		case 'S', 'U', 'a':
			why = "string dtypes are not supported"
		case 'M', 'm':
			why = "datetime and timedelta dtypes are not supported"
		}
		return dlpack.DataType{}, false, fieldErr(ErrDType, field, s, why)
	}
	size, err := strconv.Atoi(digits)
	if err != nil || digits[0] == '0' || digits[0] == '+' || digits[0] == '-' {
		return dlpack.DataType{}, false, fieldErr(ErrDType, field, s, "item size is not a positive decimal number")
	}
	dt, ok := sizes[size]
	if !ok {
		return dlpack.DataType{}, false, fieldErr(ErrDType, field, s, "no DLPack type of this kind and size (such as float128)")
	}
	if order == '|' && size > 1 {
		return dlpack.DataType{}, false, fieldErr(ErrDType, field, s, "'|' (no byte order) is only valid for one-byte types")
	}
	return dt, order == '>' && size > 1, nil
}

// npyDescr is the NumPy type string NumPy itself writes for dt.
func npyDescr(dt dlpack.DataType) (string, error) {
	for kind, sizes := range npyKinds {
		for size, t := range sizes {
			if t == dt {
				if size == 1 {
					return "|" + string(kind) + "1", nil
				}
				return "<" + string(kind) + strconv.Itoa(size), nil
			}
		}
	}
	return "", fieldErr(ErrDType, "dtype", dt, "NumPy has no builtin dtype for it")
}

// safetensorsOrder lists the safetensors dtypes in the order of the
// safetensors crate's Dtype enum, which is by increasing alignment: its
// writer lays tensors out by decreasing position in this list, then by
// name, and so do WriteSafetensors and CreateSafetensors. F8_E4M3 is the
// finite-only e4m3 (float8_e4m3fn), as in PyTorch and ml_dtypes;
// F8_E4M3FNUZ and F8_E5M2FNUZ are ml_dtypes' float8_e4m3fnuz and
// float8_e5m2fnuz (finite, unsigned zero, NaN 0x80), as the safetensors
// package names them.
var safetensorsOrder = []struct {
	name string
	dt   dlpack.DataType
}{
	{"BOOL", dlpack.Bool},
	{"U8", dlpack.Uint8},
	{"I8", dlpack.Int8},
	{"F8_E5M2", dlpack.Float8E5M2},
	{"F8_E4M3", dlpack.Float8E4M3FN},
	{"F8_E8M0", dlpack.Float8E8M0FNU},
	{"F8_E4M3FNUZ", dlpack.Float8E4M3FNUZ},
	{"F8_E5M2FNUZ", dlpack.Float8E5M2FNUZ},
	{"I16", dlpack.Int16},
	{"U16", dlpack.Uint16},
	{"F16", dlpack.Float16},
	{"BF16", dlpack.BFloat16},
	{"I32", dlpack.Int32},
	{"U32", dlpack.Uint32},
	{"F32", dlpack.Float32},
	{"C64", dlpack.Complex64},
	{"F64", dlpack.Float64},
	{"I64", dlpack.Int64},
	{"U64", dlpack.Uint64},
}

// safetensorsTypes maps the safetensors dtype names to DLPack types.
var safetensorsTypes = func() map[string]dlpack.DataType {
	m := make(map[string]dlpack.DataType, len(safetensorsOrder))
	for _, t := range safetensorsOrder {
		m[t.name] = t.dt
	}
	return m
}()

// safetensorsNames interns the names of safetensorsTypes.
var safetensorsNames = func() map[string]string {
	m := make(map[string]string, len(safetensorsTypes))
	for k := range safetensorsTypes {
		m[k] = k
	}
	return m
}()

// badSafetensorsDType is the error for a dtype name safetensorsTypes lacks.
func badSafetensorsDType(field, s string) error {
	why := "unknown safetensors dtype"
	switch s {
	case "F4", "F6_E2M3", "F6_E3M2":
		why = "sub-byte types are not supported"
	}
	return fieldErr(ErrDType, field, s, why)
}

// safetensorsName returns the safetensors name of dt and its position in
// safetensorsOrder.
func safetensorsName(dt dlpack.DataType) (name string, rank int, err error) {
	for i, t := range safetensorsOrder {
		if t.dt == dt {
			return t.name, i, nil
		}
	}
	return "", 0, fieldErr(ErrDType, "dtype", dt, "safetensors has no name for it")
}

// layout computes the element count, byte size and strides (in elements;
// row-major, or column-major when fortran) of shape, refusing any
// overflow. field names the shape in errors.
func layout(field string, shape []int64, itemSize int, fortran bool) (nbytes int64, strides []int64, err error) {
	if len(shape) > dlpack.MaxNDim {
		return 0, nil, fieldErr(ErrLayout, field, len(shape), "more than "+strconv.Itoa(dlpack.MaxNDim)+" dimensions")
	}
	return layoutInto(field, shape, itemSize, fortran, make([]int64, len(shape)))
}

// layoutInto is layout writing the strides into strides (len(shape) of
// them, at most dlpack.MaxNDim).
func layoutInto(field string, shape []int64, itemSize int, fortran bool, strides []int64) (nbytes int64, _ []int64, err error) {
	numel := int64(1)
	for k := range shape {
		i := len(shape) - 1 - k
		if fortran {
			i = k
		}
		d := shape[i]
		if d < 0 {
			return 0, nil, fieldErr(ErrLayout, field, shape, "negative dimension")
		}
		strides[i] = numel
		if d != 0 && numel > (1<<63-1)/d {
			return 0, nil, fieldErr(ErrLayout, field, shape, "element count overflows int64")
		}
		numel *= max(d, 1)
	}
	for _, d := range shape {
		if d == 0 {
			numel = 0
		}
	}
	if numel > (1<<63-1)/int64(itemSize) {
		return 0, nil, fieldErr(ErrLayout, field, shape, "byte size overflows int64")
	}
	return numel * int64(itemSize), strides, nil
}
