package dloip

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
)

// The JSON of the REST binding, read and written here rather than by
// encoding/json: a tensor's values are read straight into its buffer
// and written straight from its bytes, with no value of any other type
// in between, and what a message may say is exactly what is checked
// here (keys in their own case, none given twice, a bounded nesting).

// jsonDepth bounds the nesting of a message's JSON: a tensor's data may
// nest an array per dimension.
const jsonDepth = dlpack.MaxNDim + 8

// restMaxTensors bounds the tensors one REST message lists, and
// restMaxParams the parameters of one object: each costs a struct or a
// map entry, so that a message of tiny objects cannot make the reader
// allocate many times its own size.
const (
	restMaxTensors = 1 << 16
	restMaxParams  = 1 << 10
)

// jsonReader reads JSON from b, at i. Errors wrap ErrInvalid and name
// where, by what (the message) and the byte offset.
type jsonReader struct {
	b    []byte
	i    int
	what string
}

func (r *jsonReader) fail(why string) error {
	near := r.b[min(r.i, len(r.b)):]
	if len(near) > 24 {
		near = near[:24]
	}
	return &dlpack.FieldError{Field: fmt.Sprintf("%s: JSON at byte %d", r.what, r.i), Value: fmt.Sprintf("%q", near), Err: ErrInvalid, Why: why}
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

func (r *jsonReader) expect(c byte) error {
	if r.peek() != c {
		return r.fail(fmt.Sprintf("want %q", c))
	}
	r.i++
	return nil
}

// word reads the literal w if it is next.
func (r *jsonReader) word(w string) bool {
	r.ws()
	if bytes.HasPrefix(r.b[r.i:], []byte(w)) {
		r.i += len(w)
		return true
	}
	return false
}

// null reads a null if it is next.
func (r *jsonReader) null() bool { return r.peek() == 'n' && r.word("null") }

// str reads a string: valid UTF-8, escapes decoded. Without escapes it
// is a view of the JSON itself.
func (r *jsonReader) str() ([]byte, error) {
	if r.peek() != '"' {
		return nil, r.fail("want a string")
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s := r.b[start:j:j]
			if !ascii && !utf8.Valid(s) {
				r.i = start
				return nil, r.fail("a string that is not UTF-8")
			}
			r.i = j + 1
			return s, nil
		case c == '\\':
			return r.escaped(start, j)
		case c < 0x20:
			r.i = j
			return nil, r.fail("a control character in a string")
		case c >= 0x80:
			ascii = false
		}
	}
	r.i = len(r.b)
	return nil, r.fail("an unterminated string")
}

// escaped reads the rest of a string from its first escape, at j.
func (r *jsonReader) escaped(start, j int) ([]byte, error) {
	out := append(make([]byte, 0, j-start+16), r.b[start:j]...)
	hex4 := func(at int) (rune, bool) {
		if at+4 > len(r.b) {
			return 0, false
		}
		v, err := strconv.ParseUint(string(r.b[at:at+4]), 16, 16)
		return rune(v), err == nil
	}
	for j < len(r.b) {
		c := r.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				r.i = start
				return nil, r.fail("a string that is not UTF-8")
			}
			r.i = j + 1
			return out, nil
		case c < 0x20:
			r.i = j
			return nil, r.fail("a control character in a string")
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(r.b) {
			break
		}
		switch e := r.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			v, ok := hex4(j + 2)
			if !ok {
				r.i = j
				return nil, r.fail(`a \u escape without four hex digits`)
			}
			j += 4
			if utf16.IsSurrogate(v) {
				w, ok := hex4(j + 4)
				if v >= 0xdc00 || !ok || j+3 >= len(r.b) || r.b[j+2] != '\\' || r.b[j+3] != 'u' {
					r.i = j - 4
					return nil, r.fail("a lone UTF-16 surrogate")
				}
				if v = utf16.DecodeRune(v, w); v == utf8.RuneError {
					r.i = j - 4
					return nil, r.fail("a lone UTF-16 surrogate")
				}
				j += 6
			}
			out = utf8.AppendRune(out, v)
		default:
			r.i = j
			return nil, r.fail("an unknown escape")
		}
		j += 2
	}
	r.i = len(r.b)
	return nil, r.fail("an unterminated string")
}

// number reads a number as JSON writes one, and the words NaN, Infinity
// and -Infinity (which Python's json module and rapidjson write for
// floats JSON has no number for); it returns its text.
func (r *jsonReader) number() ([]byte, error) {
	r.ws()
	start := r.i
	if r.i < len(r.b) && (r.b[r.i] == 'N' || r.b[r.i] == 'I' || r.b[r.i] == '-' && r.i+1 < len(r.b) && r.b[r.i+1] == 'I') {
		for _, w := range []string{"NaN", "Infinity", "-Infinity"} {
			if r.word(w) {
				return r.b[start:r.i], nil
			}
		}
	}
	b, i := r.b, r.i
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return nil, r.fail("want a number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			r.i = i
			return nil, r.fail("a number without digits after its point")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			r.i = i
			return nil, r.fail("a number without exponent digits")
		}
	}
	r.i = i
	return b[start:i], nil
}

// skip reads any value and keeps nothing.
func (r *jsonReader) skip(depth int) error {
	switch r.peek() {
	case '{':
		return r.object(depth, func([]byte) error { return r.skip(depth + 1) })
	case '[':
		return r.array(depth, func(int) error { return r.skip(depth + 1) })
	case '"':
		_, err := r.str()
		return err
	case 't', 'f', 'n':
		if r.word("true") || r.word("false") || r.word("null") {
			return nil
		}
		return r.fail("want a value")
	}
	_, err := r.number()
	return err
}

// object reads an object, calling fn for each key, which reads the
// value.
func (r *jsonReader) object(depth int, fn func(key []byte) error) error {
	if depth > jsonDepth {
		return r.fail(fmt.Sprintf("nested more than %d deep", jsonDepth))
	}
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.peek() == '}' {
		r.i++
		return nil
	}
	for {
		k, err := r.str()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return r.fail("want ',' or '}'")
		}
	}
}

// array reads an array, calling fn for each element, which reads it.
func (r *jsonReader) array(depth int, fn func(i int) error) error {
	if depth > jsonDepth {
		return r.fail(fmt.Sprintf("nested more than %d deep", jsonDepth))
	}
	if err := r.expect('['); err != nil {
		return err
	}
	if r.peek() == ']' {
		r.i++
		return nil
	}
	for i := 0; ; i++ {
		if err := fn(i); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return nil
		default:
			return r.fail("want ',' or ']'")
		}
	}
}

// end checks that nothing but white space follows.
func (r *jsonReader) end() error {
	if r.peek() != 0 {
		return r.fail("more after the JSON value")
	}
	return nil
}

// integer reads an integer literal (no fraction, no exponent) as a
// sign and magnitude.
func (r *jsonReader) integer() (neg bool, mag uint64, err error) {
	at := r.i
	s, err := r.number()
	if err != nil {
		return false, 0, err
	}
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			r.i = at
			return false, 0, r.fail("want an integer")
		}
		if mag > (math.MaxUint64-uint64(c-'0'))/10 {
			r.i = at
			return false, 0, r.fail("an integer beyond 64 bits")
		}
		mag = mag*10 + uint64(c-'0')
	}
	return neg, mag, nil
}

// int64 reads an integer that fits an int64.
func (r *jsonReader) int64() (int64, error) {
	at := r.i
	neg, mag, err := r.integer()
	if err != nil {
		return 0, err
	}
	if neg && mag <= 1<<63 {
		return -int64(mag), nil
	}
	if !neg && mag < 1<<63 {
		return int64(mag), nil
	}
	r.i = at
	return 0, r.fail("an integer beyond int64")
}

// params reads a parameters object (or null): each value a bool, a
// string or a number (int64 when an integer that fits, uint64 when a
// larger one that does, float64 otherwise).
func (r *jsonReader) params(depth int) (Parameters, error) {
	if r.null() {
		return nil, nil
	}
	var p Parameters
	err := r.object(depth, func(k []byte) error {
		if p == nil {
			p = Parameters{}
		}
		if _, dup := p[string(k)]; dup {
			return r.fail(fmt.Sprintf("parameter %q given twice", k))
		}
		if len(p) == restMaxParams {
			return r.fail(fmt.Sprintf("more than %d parameters", restMaxParams))
		}
		switch r.peek() {
		case 't', 'f':
			v := r.word("true")
			if !v && !r.word("false") {
				return r.fail("want a value")
			}
			p[string(k)] = v
		case '"':
			s, err := r.str()
			if err != nil {
				return err
			}
			p[string(k)] = string(s)
		default:
			at := r.i
			s, err := r.number()
			if err != nil {
				return r.fail("a parameter is a bool, a number or a string")
			}
			if i, err := strconv.ParseInt(string(s), 10, 64); err == nil {
				p[string(k)] = i
			} else if u, err := strconv.ParseUint(string(s), 10, 64); err == nil {
				p[string(k)] = u
			} else if f, err := strconv.ParseFloat(string(s), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				p[string(k)] = f
			} else {
				r.i = at
				return r.fail("a parameter is a bool, a finite number or a string")
			}
		}
		return nil
	})
	return p, err
}

// restTensor is a tensor of a REST message as its JSON says: an input of
// a request or an output of a response.
type restTensor struct {
	name     string
	datatype string
	shape    []int64
	params   Parameters
	// data is the JSON of its "data" (nil when there is none, or null);
	// binary is its "binary_data_size" parameter (-1 when there is
	// none), which the params do not keep.
	data   []byte
	binary int64
}

// restOutput is an output a request asks for.
type restOutput struct {
	name   string
	params Parameters
}

// restMessage is the JSON of a REST inference request or response.
type restMessage struct {
	id, model, version string
	params             Parameters
	// tensors: a request's inputs, a response's outputs
	tensors []restTensor
	// outputs: the outputs a request asks for
	outputs []restOutput
}

// parseREST reads the JSON of a request (inputs under "inputs", the
// outputs asked for under "outputs") or of a response ("outputs").
func parseREST(b []byte, request bool) (*restMessage, error) {
	what := "response"
	if request {
		what = "request"
	}
	r := &jsonReader{b: b, what: what}
	m := &restMessage{}
	var seen uint
	once := func(k []byte, bit uint) error {
		if seen&bit != 0 {
			return r.fail(fmt.Sprintf("%q given twice", k))
		}
		seen |= bit
		return nil
	}
	optStr := func(dst *string) error {
		if r.null() {
			return nil
		}
		s, err := r.str()
		*dst = string(s)
		return err
	}
	err := r.object(0, func(k []byte) error {
		var err error
		switch string(k) {
		case "id":
			if err = once(k, 1); err == nil {
				err = optStr(&m.id)
			}
		case "model_name":
			if err = once(k, 2); err == nil {
				err = optStr(&m.model)
			}
		case "model_version":
			if err = once(k, 4); err == nil {
				err = optStr(&m.version)
			}
		case "parameters":
			if err = once(k, 8); err == nil {
				m.params, err = r.params(1)
			}
		case "inputs":
			if err = once(k, 16); err == nil && request {
				err = r.tensors(&m.tensors)
			} else if err == nil {
				err = r.skip(1)
			}
		case "outputs":
			if err = once(k, 32); err != nil {
				return err
			}
			if !request {
				return r.tensors(&m.tensors)
			}
			if r.null() {
				return nil
			}
			return r.array(1, func(int) error {
				if len(m.outputs) == restMaxTensors {
					return r.fail(fmt.Sprintf("more than %d outputs", restMaxTensors))
				}
				var o restOutput
				var oseen uint
				err := r.object(2, func(k []byte) error {
					switch string(k) {
					case "name":
						if oseen&1 != 0 {
							return r.fail(`"name" given twice`)
						}
						oseen |= 1
						s, err := r.str()
						o.name = string(s)
						return err
					case "parameters":
						if oseen&2 != 0 {
							return r.fail(`"parameters" given twice`)
						}
						oseen |= 2
						var err error
						o.params, err = r.params(3)
						return err
					}
					return r.skip(3)
				})
				m.outputs = append(m.outputs, o)
				return err
			})
		default:
			err = r.skip(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	if seen&16 == 0 && request || seen&32 == 0 && !request {
		r.i = 0
		return nil, r.fail(fmt.Sprintf(`no "%ss"`, map[bool]string{true: "input", false: "output"}[request]))
	}
	return m, nil
}

// tensors reads a list of tensors.
func (r *jsonReader) tensors(dst *[]restTensor) error {
	return r.array(1, func(int) error {
		if len(*dst) == restMaxTensors {
			return r.fail(fmt.Sprintf("more than %d tensors", restMaxTensors))
		}
		t := restTensor{binary: -1}
		var seen uint
		at := r.i
		err := r.object(2, func(k []byte) error {
			var bit uint
			switch string(k) {
			case "name":
				bit = 1
			case "datatype":
				bit = 2
			case "shape":
				bit = 4
			case "parameters":
				bit = 8
			case "data":
				bit = 16
			default:
				return r.skip(3)
			}
			if seen&bit != 0 {
				return r.fail(fmt.Sprintf("%q given twice", k))
			}
			seen |= bit
			switch bit {
			case 1, 2:
				s, err := r.str()
				if bit == 1 {
					t.name = string(s)
				} else {
					t.datatype = string(s)
				}
				return err
			case 4:
				t.shape = []int64{}
				return r.array(3, func(i int) error {
					if i == dlpack.MaxNDim {
						return r.fail(fmt.Sprintf("more than %d dimensions", dlpack.MaxNDim))
					}
					d, err := r.int64()
					t.shape = append(t.shape, d)
					return err
				})
			case 8:
				var err error
				if t.params, err = r.params(3); err != nil {
					return err
				}
				if v, ok := t.params[ParamBinaryDataSize]; ok {
					delete(t.params, ParamBinaryDataSize)
					if len(t.params) == 0 {
						t.params = nil
					}
					switch n := v.(type) {
					case int64:
						t.binary = n
					}
					if t.binary < 0 {
						return r.fail(fmt.Sprintf("%s %v: a size is a non-negative integer", ParamBinaryDataSize, v))
					}
				}
				return nil
			}
			if r.null() {
				return nil
			}
			r.ws()
			start := r.i
			if err := r.skip(3); err != nil {
				return err
			}
			t.data = r.b[start:r.i:r.i]
			return nil
		})
		if err != nil {
			return err
		}
		if seen&7 != 7 {
			r.i = at
			return r.fail(`a tensor needs "name", "datatype" and "shape"`)
		}
		*dst = append(*dst, t)
		return nil
	})
}

// ParamBinaryDataSize is the parameter of Triton's binary-data extension
// that gives the byte size of a tensor's binary data, which follows the
// JSON of a REST message: each input's or output's, in order.
const ParamBinaryDataSize = "binary_data_size"

// decodeValues reads the JSON values of data (an array, nested or flat,
// in row-major order) into buf, the n elements of a tensor of datatype
// (not BYTES): an integer type takes integers in its range, BOOL true
// and false, a float type any number (read as a float64, then rounded to
// the type, ties to even, as NumPy does) and NaN, Infinity and
// -Infinity. Anything else, or a count other than n, fails naming the
// element.
func decodeValues(field, datatype string, data []byte, n int64, buf []byte) error {
	r := &jsonReader{b: data, what: field + ": data"}
	dt, err := ParseDatatype(datatype)
	if err != nil {
		return err
	}
	size := dt.ItemSize()
	var k int64
	var value func() error
	value = func() error {
		if r.peek() == '[' {
			return r.array(1, func(int) error { return value() })
		}
		if k == n {
			return r.fail(fmt.Sprintf("more values than the %d of the shape", n))
		}
		at := buf[k*int64(size):]
		start := r.i
		bad := func(why string) error {
			r.i = start
			return r.fail(fmt.Sprintf("element %d: %s", k, why))
		}
		switch datatype {
		case "BOOL":
			switch {
			case r.word("true"):
				at[0] = 1
			case r.word("false"):
				at[0] = 0
			default:
				return bad("BOOL takes true or false")
			}
		case "UINT8", "UINT16", "UINT32", "UINT64":
			neg, mag, err := r.integer()
			if err != nil {
				return bad("want an integer")
			}
			if neg && mag != 0 || size < 8 && mag >= 1<<(8*size) {
				return bad("out of range for " + datatype)
			}
			putLE(at, mag, size)
		case "INT8", "INT16", "INT32", "INT64":
			neg, mag, err := r.integer()
			if err != nil {
				return bad("want an integer")
			}
			lim := uint64(1) << (8*size - 1)
			if neg && mag > lim || !neg && mag >= lim {
				return bad("out of range for " + datatype)
			}
			v := mag
			if neg {
				v = -mag
			}
			putLE(at, v, size)
		default:
			s, err := r.number()
			if err != nil {
				return bad("want a number")
			}
			f, err := parseFloat(s)
			if err != nil {
				return bad("want a number")
			}
			switch datatype {
			case "FP16":
				binary.LittleEndian.PutUint16(at, uint16(minifloat.Float16From32(roundOdd32(f))))
			case "BF16":
				binary.LittleEndian.PutUint16(at, uint16(minifloat.BFloat16From32(roundOdd32(f))))
			case "FP32":
				binary.LittleEndian.PutUint32(at, math.Float32bits(float32(f)))
			case "FP64":
				binary.LittleEndian.PutUint64(at, math.Float64bits(f))
			}
		}
		k++
		return nil
	}
	if r.peek() != '[' {
		return r.fail("data is an array of the values")
	}
	if err := value(); err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	if k != n {
		return &dlpack.FieldError{Field: field + ": data", Value: fmt.Sprintf("%d values", k), Err: ErrInvalid, Why: fmt.Sprintf("the shape has %d elements", n)}
	}
	return nil
}

// parseFloat reads a number or NaN, Infinity, -Infinity as a float64; a
// number beyond the range of float64 is an infinity.
func parseFloat(s []byte) (float64, error) {
	switch string(s) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(s), len(s)), 64)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		err = nil
	}
	return f, err
}

// roundOdd32 is x rounded to a float32 by rounding to odd: toward zero,
// the last bit set when inexact. Rounded again to fewer than 23 bits of
// mantissa (float16, bfloat16), it gives x rounded once to those, ties to
// even, with no double rounding.
func roundOdd32(x float64) float32 {
	f := float32(x)
	if float64(f) == x || x != x {
		return f
	}
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Float32frombits(math.Float32bits(f) - 1)
	}
	return math.Float32frombits(math.Float32bits(f) | 1)
}

// decodeStrings reads the JSON strings of data (an array, nested or
// flat) as the n elements of a BYTES tensor: its raw layout (each
// element's length, 4 bytes little-endian, then its bytes) in one buffer
// and the elements, views of it.
func decodeStrings(field string, data []byte, n int64) ([]byte, [][]byte, error) {
	r := &jsonReader{b: data, what: field + ": data"}
	elems := make([][]byte, 0, n)
	size := 0
	var value func() error
	value = func() error {
		if r.peek() == '[' {
			return r.array(1, func(int) error { return value() })
		}
		if int64(len(elems)) == n {
			return r.fail(fmt.Sprintf("more values than the %d of the shape", n))
		}
		s, err := r.str()
		if err != nil {
			return err
		}
		elems = append(elems, s)
		size += 4 + len(s)
		return nil
	}
	if r.peek() != '[' {
		return nil, nil, r.fail("data is an array of the values")
	}
	if err := value(); err != nil {
		return nil, nil, err
	}
	if err := r.end(); err != nil {
		return nil, nil, err
	}
	if int64(len(elems)) != n {
		return nil, nil, &dlpack.FieldError{Field: field + ": data", Value: fmt.Sprintf("%d values", len(elems)), Err: ErrInvalid, Why: fmt.Sprintf("the shape has %d elements", n)}
	}
	raw := appendBytes(make([]byte, 0, size), elems)
	at := 0
	for i, e := range elems {
		at += 4
		elems[i] = raw[at : at+len(e) : at+len(e)]
		at += len(e)
	}
	return raw, elems, nil
}

// jsonPart is a part of a JSON document to write: text as it is, or a
// tensor's values as a flat JSON array.
type jsonPart struct {
	text     []byte
	datatype string
	data     []byte   // the tensor's bytes (not BYTES)
	elems    [][]byte // a BYTES tensor's elements
	values   bool
}

// jsonStream writes a JSON document of parts a piece at a time, so that
// a tensor's values are never held as JSON whole: each piece is about
// jsonPiece bytes, appended to a buffer the caller reuses.
type jsonStream struct {
	parts []jsonPart
	part  int
	state int // 0 before the part's '[', else 1 + its next value
}

// jsonPiece is about how much JSON next writes at a time.
const jsonPiece = 64 << 10

// next appends the next piece of the document to dst; done is true once
// the whole document is written.
func (s *jsonStream) next(dst []byte) (out []byte, done bool) {
	for s.part < len(s.parts) && len(dst) < jsonPiece {
		p := &s.parts[s.part]
		if !p.values {
			dst = append(dst, p.text...)
			s.part++
			continue
		}
		if dst, s.state = appendValues(dst, p, s.state, jsonPiece); s.state == 0 {
			s.part++
		}
	}
	return dst, s.part == len(s.parts)
}

// size is the length of the whole document from where the stream is
// (every value formatted, none kept); the stream is left as it was.
func (s jsonStream) size() int64 {
	var n int64
	buf := make([]byte, 0, jsonPiece+256)
	for {
		var done bool
		buf, done = s.next(buf[:0])
		n += int64(len(buf))
		if done {
			return n
		}
	}
}

// appendValues appends the values of p from state (0: its opening '[',
// else 1 + the next value) until dst holds limit bytes; it returns the
// next state, 0 once the closing ']' is written.
func appendValues(dst []byte, p *jsonPart, state, limit int) ([]byte, int) {
	from := state - 1
	if state == 0 {
		dst = append(dst, '[')
		from = 0
	}
	var n, size int
	if p.datatype == BYTES {
		n = len(p.elems)
	} else {
		dt, _ := ParseDatatype(p.datatype)
		size = dt.ItemSize()
		n = len(p.data) / size
	}
	i := from
	for ; i < n && len(dst) < limit; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch p.datatype {
		case BYTES:
			dst = appendJSONString(dst, p.elems[i])
		case "BOOL":
			if p.data[i] != 0 {
				dst = append(dst, "true"...)
			} else {
				dst = append(dst, "false"...)
			}
		case "UINT8", "UINT16", "UINT32", "UINT64":
			dst = strconv.AppendUint(dst, getLE(p.data[i*size:], size), 10)
		case "INT8", "INT16", "INT32", "INT64":
			v := getLE(p.data[i*size:], size)
			shift := 64 - 8*size
			dst = strconv.AppendInt(dst, int64(v<<shift)>>shift, 10)
		case "FP16":
			h := minifloat.Float16(binary.LittleEndian.Uint16(p.data[2*i:]))
			dst = appendFloat(dst, h.Float64(), func(v float64) bool { return minifloat.Float16From32(roundOdd32(v)) == h })
		case "BF16":
			h := minifloat.BFloat16(binary.LittleEndian.Uint16(p.data[2*i:]))
			dst = appendFloat(dst, h.Float64(), func(v float64) bool { return minifloat.BFloat16From32(roundOdd32(v)) == h })
		case "FP32":
			f := math.Float32frombits(binary.LittleEndian.Uint32(p.data[4*i:]))
			dst = appendFloat(dst, float64(f), func(v float64) bool { return float32(v) == f })
		case "FP64":
			dst = appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(p.data[8*i:])), nil)
		}
	}
	if i == n {
		return append(dst, ']'), 0
	}
	return dst, i + 1
}

// appendFloat writes x, a float64 or a narrower float widened exactly,
// so that it reads back as the same bits: for a narrower float (narrow
// set: whether a float64 read back rounds to it), the shortest decimal
// of its float32 when that float32 decimal, read as a float64 (as
// Python, orjson and NumPy read it) and rounded, gives it back, else,
// as for a float64, the shortest decimal that reads back as the same
// float64 (as Triton writes floats); NaN and the infinities as NaN,
// Infinity and -Infinity, which Python's json module and rapidjson read
// (JSON has no number for them, and a NaN's payload is lost); a
// negative zero as -0.0.
func appendFloat(dst []byte, x float64, narrow func(float64) bool) []byte {
	switch {
	case x != x:
		return append(dst, "NaN"...)
	case math.IsInf(x, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(x, -1):
		return append(dst, "-Infinity"...)
	case x == 0 && math.Signbit(x):
		// "-0" reads as the integer 0 in Python and orjson: the sign
		// would be lost
		return append(dst, "-0.0"...)
	}
	if narrow != nil {
		n := len(dst)
		dst = strconv.AppendFloat(dst, x, 'g', -1, 32)
		if v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(dst[n:]), len(dst)-n), 64); err == nil && narrow(v) {
			return dst
		}
		dst = dst[:n]
	}
	return strconv.AppendFloat(dst, x, 'g', -1, 64)
}

func getLE(b []byte, size int) uint64 {
	var v uint64
	for j := size - 1; j >= 0; j-- {
		v = v<<8 | uint64(b[j])
	}
	return v
}

// appendJSONString writes s, valid UTF-8, as a JSON string.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendParams writes p as a JSON object, keys sorted; a value of
// another type than bool, int, int64, uint64, float64 (finite) or string
// fails with ErrInvalid naming field and the key.
func appendParams(dst []byte, field string, p Parameters) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(p))
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, []byte(k))
		dst = append(dst, ':')
		switch v := p[k].(type) {
		case bool:
			dst = strconv.AppendBool(dst, v)
		case int:
			dst = strconv.AppendInt(dst, int64(v), 10)
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		case uint64:
			dst = strconv.AppendUint(dst, v, 10)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s[%q]", field, k), Value: v, Err: ErrInvalid, Why: "JSON has no number for it"}
			}
			dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		case string:
			if !utf8.ValidString(v) {
				return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s[%q]", field, k), Value: fmt.Sprintf("%q", v), Err: ErrInvalid, Why: "not UTF-8"}
			}
			dst = appendJSONString(dst, []byte(v))
		default:
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s[%q]", field, k), Value: fmt.Sprintf("%T", v), Err: ErrInvalid,
				Why: "a parameter is a bool, int64, string, float64 or uint64"}
		}
	}
	return append(dst, '}'), nil
}

// appendShape writes a shape as a JSON array.
func appendShape(dst []byte, shape []int64) []byte {
	dst = append(dst, '[')
	for i, d := range shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	return append(dst, ']')
}
