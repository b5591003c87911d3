package dloip

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// The REST binding's messages, read and written by server and client
// alike: a JSON document, then, with Triton's binary-data extension, the
// binary data of its tensors in their order, each tensor's bytes as the
// raw contents of gRPC carry them (BYTES in the same layout), the JSON's
// length in the header HeaderInferenceContentLength and each tensor's
// byte size in its ParamBinaryDataSize parameter.

// HeaderInferenceContentLength is the HTTP header of Triton's
// binary-data extension: the length of a REST message's JSON, which the
// binary data of its tensors follows.
const HeaderInferenceContentLength = "Inference-Header-Content-Length"

// restChunk is the most of a body read or written between two pushes of
// its deadline.
const restChunk = 4 << 20

// restLimits bound what a received REST message may make its reader
// allocate.
type restLimits struct {
	// maxBody bounds the body (MaxMessageBytes), maxTensor the bytes of
	// its tensors (MaxTensorBytes; negative: no bound).
	maxBody, maxTensor int64
	alloc              dlgrpc.Allocator
	// progress, when set, runs before each read of the body (a server
	// pushes its read deadline on).
	progress func()
}

// restIn is a received REST message: its JSON, read, and the binary data
// of its tensors, each in a 64-byte aligned buffer of alloc that is
// freed once no Tensor uses it.
type restIn struct {
	msg   *restMessage
	what  string // "input" or "output"
	bins  [][]byte
	alloc dlgrpc.Allocator
	taken []bool
}

// readREST reads a REST message from body: length bytes (-1 when the
// body does not say), the first hdr of them its JSON when hdr (the
// binary-data extension's header) is not "". Every length is checked
// before anything is allocated for it: the body's and the JSON's against
// maxBody; the JSON is then read into a buffer that grows with what
// arrives, and parsed; check approves its tensors (their datatypes and
// shapes, against the limits); then each binary data size must be its
// tensor's byte size (BYTES: at least 4 bytes an element), their sum
// within maxTensor, and the JSON and the binary data together the body's
// length. Only then is each tensor's buffer allocated, in turn, and its
// bytes read straight into it. On error nothing is held.
func readREST(body io.Reader, length int64, hdr string, request bool, lim restLimits, check func(*restMessage) error) (_ *restIn, err error) {
	what, whole := "output", "response"
	if request {
		what, whole = "input", "request"
	}
	if length > lim.maxBody {
		return nil, &dlpack.FieldError{Field: whole + ": Content-Length", Value: length, Err: ErrLimit, Why: fmt.Sprintf("MaxMessageBytes is %d", lim.maxBody)}
	}
	jsonLen := length
	if hdr != "" {
		n, err := strconv.ParseUint(hdr, 10, 63)
		if err != nil {
			return nil, &dlpack.FieldError{Field: whole + ": " + HeaderInferenceContentLength, Value: fmt.Sprintf("%q", hdr), Err: ErrInvalid, Why: "not a byte count"}
		}
		if jsonLen = int64(n); jsonLen > lim.maxBody {
			return nil, &dlpack.FieldError{Field: whole + ": " + HeaderInferenceContentLength, Value: jsonLen, Err: ErrLimit, Why: fmt.Sprintf("MaxMessageBytes is %d", lim.maxBody)}
		}
		if length >= 0 && jsonLen > length {
			return nil, &dlpack.FieldError{Field: whole + ": " + HeaderInferenceContentLength, Value: jsonLen, Err: ErrInvalid, Why: fmt.Sprintf("the body has %d bytes", length)}
		}
	}
	js, err := readGrowing(body, jsonLen, lim, whole)
	if err != nil {
		return nil, err
	}
	msg, err := parseREST(js, request)
	if err != nil {
		return nil, err
	}
	in := &restIn{msg: msg, what: what, bins: make([][]byte, len(msg.tensors)), taken: make([]bool, len(msg.tensors)), alloc: lim.alloc}
	defer func() {
		if err != nil {
			in.freeRest()
		}
	}()
	for _, t := range msg.tensors {
		if t.binary > 0 && hdr == "" {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: parameters", what, t.name), Value: ParamBinaryDataSize, Err: ErrInvalid,
				Why: "binary data needs the " + HeaderInferenceContentLength + " header"}
		}
		if t.binary >= 0 && t.data != nil {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s %q", what, t.name), Value: "data and " + ParamBinaryDataSize, Err: ErrInvalid,
				Why: "a tensor travels in JSON or as binary data, not both"}
		}
	}
	if err := check(msg); err != nil {
		return nil, err
	}
	var sum int64
	for _, t := range msg.tensors {
		if t.binary < 0 {
			continue
		}
		field := fmt.Sprintf("%s %q: %s", what, t.name, ParamBinaryDataSize)
		least, err := minBytes(t.datatype, t.shape)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, t.name, err)
		}
		if t.datatype != BYTES && t.binary != least || t.binary < least {
			return nil, &dlpack.FieldError{Field: field, Value: t.binary, Err: ErrInvalid, Why: fmt.Sprintf("%s %v needs %d bytes", t.datatype, t.shape, least)}
		}
		if t.binary > lim.maxBody {
			return nil, &dlpack.FieldError{Field: field, Value: t.binary, Err: ErrLimit, Why: fmt.Sprintf("MaxMessageBytes is %d", lim.maxBody)}
		}
		if sum += t.binary; lim.maxTensor >= 0 && sum > lim.maxTensor {
			return nil, &dlpack.FieldError{Field: field, Value: fmt.Sprintf("%d bytes of binary data", sum), Err: ErrLimit, Why: fmt.Sprintf("MaxTensorBytes is %d", lim.maxTensor)}
		}
	}
	switch {
	case length >= 0 && jsonLen+sum != length:
		return nil, &dlpack.FieldError{Field: whole + ": Content-Length", Value: length, Err: ErrInvalid,
			Why: fmt.Sprintf("the JSON's %d bytes and the binary data's %d make %d", jsonLen, sum, jsonLen+sum)}
	case length < 0 && jsonLen+sum > lim.maxBody:
		return nil, &dlpack.FieldError{Field: whole, Value: fmt.Sprintf("%d bytes", jsonLen+sum), Err: ErrLimit, Why: fmt.Sprintf("MaxMessageBytes is %d", lim.maxBody)}
	}
	for i, t := range msg.tensors {
		if t.binary < 0 {
			continue
		}
		// (kserve's client sends an empty tensor as binary data of 0
		// bytes without the header)
		b := []byte{}
		if t.binary > 0 {
			b = lim.alloc.Allocate(int(t.binary))
		}
		in.bins[i] = b
		if err := readFull(body, b, lim); err != nil {
			return nil, bodyErr(err, fmt.Sprintf("%s %q: binary data", what, t.name), t.binary)
		}
	}
	// the body's end, which a client must read for its connection to be
	// used again
	{
		var one [1]byte
		if n, err := io.ReadFull(body, one[:]); n > 0 {
			return nil, &dlpack.FieldError{Field: whole, Value: "more bytes", Err: ErrInvalid, Why: "the body goes on after the JSON and the binary data its parameters give"}
		} else if err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, bodyErr(err, whole, 0)
		}
	}
	return in, nil
}

// readGrowing reads n bytes of body (-1: all of it, up to maxBody) into
// a buffer that grows as they arrive.
func readGrowing(body io.Reader, n int64, lim restLimits, whole string) ([]byte, error) {
	size := int64(64 << 10)
	if n >= 0 {
		size = min(size, n)
	}
	b := make([]byte, 0, size)
	for {
		if lim.progress != nil {
			lim.progress()
		}
		want := int64(cap(b))
		if n >= 0 {
			want = min(want, n)
		}
		k, err := io.ReadFull(body, b[len(b):want])
		b = b[:len(b)+k]
		switch {
		case n >= 0 && int64(len(b)) == n:
			return b, nil
		case n < 0 && (err == io.EOF || err == io.ErrUnexpectedEOF):
			return b, nil
		case err != nil:
			return nil, bodyErr(err, whole+": JSON", n)
		case n < 0 && int64(len(b)) >= lim.maxBody:
			return nil, &dlpack.FieldError{Field: whole, Value: fmt.Sprintf("more than %d bytes", lim.maxBody), Err: ErrLimit, Why: "MaxMessageBytes"}
		}
		grow := min(2*int64(cap(b)), lim.maxBody+1)
		if n >= 0 {
			grow = min(grow, n)
		}
		b = append(b[:cap(b)], make([]byte, grow-int64(cap(b)))...)[:len(b)]
	}
}

// readFull reads len(b) bytes, in pieces of at most restChunk, calling
// progress before each.
func readFull(body io.Reader, b []byte, lim restLimits) error {
	for len(b) > 0 {
		if lim.progress != nil {
			lim.progress()
		}
		k := min(len(b), restChunk)
		if _, err := io.ReadFull(body, b[:k]); err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

// bodyErr says why a body's read failed: it ended too soon (ErrInvalid),
// it passed MaxMessageBytes (ErrLimit), or the connection's error.
func bodyErr(err error, field string, want int64) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &dlpack.FieldError{Field: field, Value: fmt.Sprintf("more than %d bytes", tooLarge.Limit), Err: ErrLimit, Why: "MaxMessageBytes"}
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return &dlpack.FieldError{Field: field, Value: fmt.Sprintf("%d bytes declared", want), Err: ErrInvalid, Why: "the body ends before them"}
	}
	return fmt.Errorf("%s: %w", field, err)
}

// take hands tensor k's binary data to a Tensor, with the function that
// frees it.
func (in *restIn) take(k int) ([]byte, func()) {
	in.taken[k] = true
	b := in.bins[k]
	if len(b) == 0 {
		return b, nil
	}
	return b, func() { in.alloc.Free(b) }
}

// freeRest frees the binary data no Tensor took.
func (in *restIn) freeRest() {
	for k, b := range in.bins {
		if !in.taken[k] && len(b) > 0 {
			in.alloc.Free(b)
		}
		in.taken[k] = true
	}
}

// tensors makes a Tensor of each of in's tensors: one that came as
// binary data shares its buffer; one that came as JSON is decoded into a
// buffer of its own (IsCopied), once the count of its elements has been
// checked against the size of its JSON (each value takes two bytes at
// least, a string three). On error every Tensor made is released and
// every buffer freed.
func (in *restIn) tensors() (ts []*Tensor, err error) {
	defer in.freeRest()
	defer func() {
		if err != nil {
			for _, t := range ts {
				t.Close()
			}
			ts = nil
		}
	}()
	what := in.what
	seen := make(map[string]bool, len(in.msg.tensors))
	for i, w := range in.msg.tensors {
		if w.name == "" || seen[w.name] {
			return ts, &dlpack.FieldError{Field: fmt.Sprintf("%ss[%d].name", what, i), Value: fmt.Sprintf("%q", w.name), Err: ErrInvalid, Why: "empty or given twice"}
		}
		seen[w.name] = true
		var t *Tensor
		wt := wireTensor{name: w.name, datatype: w.datatype, shape: w.shape}
		switch {
		case w.binary >= 0:
			raw, free := in.take(i)
			if t, err = rawTensor(what, wt, raw, false, free); err != nil && free != nil {
				free()
			}
		case w.data != nil:
			t, err = jsonTensor(what, w, in.alloc)
		default:
			err = &dlpack.FieldError{Field: fmt.Sprintf("%s %q", what, w.name), Value: "no data", Err: ErrInvalid,
				Why: `a tensor travels as "data" in the JSON, or as binary data with its ` + ParamBinaryDataSize}
		}
		if err != nil {
			return ts, err
		}
		t.params = w.params
		ts = append(ts, t)
	}
	return ts, nil
}

// jsonTensor decodes the JSON values of a tensor into a buffer of alloc.
func jsonTensor(what string, w restTensor, alloc dlgrpc.Allocator) (*Tensor, error) {
	field := fmt.Sprintf("%s %q", what, w.name)
	n, err := elements(w.shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if w.datatype == BYTES {
		if n > (int64(len(w.data))+1)/3 {
			return nil, &dlpack.FieldError{Field: field + ": data", Value: fmt.Sprintf("%d bytes of JSON", len(w.data)), Err: ErrInvalid,
				Why: fmt.Sprintf("they hold at most %d strings, and the shape %v has %d elements", (len(w.data)+1)/3, w.shape, n)}
		}
		raw, elems, err := decodeStrings(field, w.data, n)
		if err != nil {
			return nil, err
		}
		t, err := newBytesTensor(w.name, w.shape, raw, elems, false, nil)
		if err != nil {
			return nil, err
		}
		t.copied = true
		return t, nil
	}
	dt, err := ParseDatatype(w.datatype)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if n > (int64(len(w.data))+1)/2 {
		return nil, &dlpack.FieldError{Field: field + ": data", Value: fmt.Sprintf("%d bytes of JSON", len(w.data)), Err: ErrInvalid,
			Why: fmt.Sprintf("they hold at most %d values, and the shape %v has %d elements", (len(w.data)+1)/2, w.shape, n)}
	}
	size := n * int64(dt.ItemSize())
	b := []byte{}
	var free func()
	if size > 0 {
		b = alloc.Allocate(int(size))
		free = func() { alloc.Free(b) }
	}
	if err := decodeValues(field, w.datatype, w.data, n, b); err != nil {
		if free != nil {
			free()
		}
		return nil, err
	}
	t, err := newTensor(what, w.name, w.datatype, w.shape, b, false, free)
	if err != nil {
		if free != nil {
			free()
		}
		return nil, err
	}
	t.copied = true
	return t, nil
}

// restTensorOut is a tensor of a REST message to send.
type restTensorOut struct {
	name   string
	params Parameters
	taken
	// binary: it goes as binary data after the JSON, else as JSON values
	binary bool
}

// restHead writes the JSON of a tensor to send up to its data: its name,
// datatype, shape and parameters (with its binary data size when it goes
// as binary data), and `,"data":` when it goes as JSON.
func restHead(dst []byte, field string, t *restTensorOut) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, []byte(t.name))
	dst = append(dst, `,"datatype":`...)
	dst = appendJSONString(dst, []byte(t.datatype))
	dst = append(dst, `,"shape":`...)
	dst = appendShape(dst, t.shape)
	params := t.params
	if t.binary {
		params = make(Parameters, len(t.params)+1)
		for k, v := range t.params {
			params[k] = v
		}
		params[ParamBinaryDataSize] = int64(len(t.data))
	}
	if len(params) > 0 {
		dst = append(dst, `,"parameters":`...)
		var err error
		if dst, err = appendParams(dst, field+": parameters", params); err != nil {
			return nil, err
		}
	}
	if !t.binary {
		dst = append(dst, `,"data":`...)
	}
	return dst, nil
}

// restStream is the JSON of a message to send: head (the message's
// fields, up to its list of tensors, under key), each tensor, and tail.
// A BYTES tensor to go as JSON must hold UTF-8 text (ErrInvalid naming
// the element otherwise: JSON strings are text).
func restStream(head []byte, what, key string, ts []restTensorOut, tail []byte) (*jsonStream, error) {
	head = append(append(append(head, '"'), key...), `":[`...)
	var parts []jsonPart
	for i := range ts {
		t := &ts[i]
		field := fmt.Sprintf("%s %q", what, t.name)
		if i > 0 {
			head = append(head, ',')
		}
		var err error
		if head, err = restHead(head, field, t); err != nil {
			return nil, err
		}
		if t.binary {
			head = append(head, '}')
			continue
		}
		p := jsonPart{datatype: t.datatype, data: t.data, values: true}
		if t.datatype == BYTES {
			if p.elems, err = splitBytes(field, t.shape, t.data); err != nil {
				return nil, err
			}
			for k, e := range p.elems {
				if !utf8.Valid(e) {
					return nil, &dlpack.FieldError{Field: fmt.Sprintf("%s: element %d", field, k), Value: fmt.Sprintf("%.40q", e), Err: ErrInvalid,
						Why: "BYTES that are not UTF-8 text have no JSON string: ask for it as binary data (the binary_data parameter)"}
				}
			}
		}
		parts = append(parts, jsonPart{text: head}, p)
		head = []byte{'}'}
	}
	head = append(append(head, ']'), tail...)
	return &jsonStream{parts: append(parts, jsonPart{text: head})}, nil
}
