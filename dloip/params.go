package dloip

import (
	"fmt"
	"sort"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
)

// Parameters are the protocol's parameters of a request, a response or
// one tensor: each value a bool, int64, string, float64 or uint64 (the
// protocol's InferParameter; an int is taken as int64). Peers use them
// for options such as Triton's "shared_memory_region" or kserve's
// "binary_data_size".
type Parameters map[string]any

// toPB converts p; a value of another type fails with ErrInvalid naming
// where (field) and the key.
func (p Parameters) toPB(field string) (map[string]*pb.InferParameter, error) {
	if len(p) == 0 {
		return nil, nil
	}
	out := make(map[string]*pb.InferParameter, len(p))
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var q pb.InferParameter
		switch v := p[k].(type) {
		case bool:
			q.ParameterChoice = &pb.InferParameter_BoolParam{BoolParam: v}
		case int64:
			q.ParameterChoice = &pb.InferParameter_Int64Param{Int64Param: v}
		case int:
			q.ParameterChoice = &pb.InferParameter_Int64Param{Int64Param: int64(v)}
		case string:
			q.ParameterChoice = &pb.InferParameter_StringParam{StringParam: v}
		case float64:
			q.ParameterChoice = &pb.InferParameter_DoubleParam{DoubleParam: v}
		case uint64:
			q.ParameterChoice = &pb.InferParameter_Uint64Param{Uint64Param: v}
		default:
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s[%q]", field, k), Value: fmt.Sprintf("%T", v), Err: ErrInvalid,
				Why: "a parameter is a bool, int64, string, float64 or uint64"}
		}
		out[k] = &q
	}
	return out, nil
}

// paramsOf converts received parameters (nil when none).
func paramsOf(m map[string]*pb.InferParameter) Parameters {
	if len(m) == 0 {
		return nil
	}
	out := make(Parameters, len(m))
	for k, q := range m {
		switch v := q.GetParameterChoice().(type) {
		case *pb.InferParameter_BoolParam:
			out[k] = v.BoolParam
		case *pb.InferParameter_Int64Param:
			out[k] = v.Int64Param
		case *pb.InferParameter_StringParam:
			out[k] = v.StringParam
		case *pb.InferParameter_DoubleParam:
			out[k] = v.DoubleParam
		case *pb.InferParameter_Uint64Param:
			out[k] = v.Uint64Param
		}
	}
	return out
}
