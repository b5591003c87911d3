package dloip

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
)

// taken is a producer's tensor held to be sent: compact row-major bytes.
type taken struct {
	release  func()
	datatype string
	shape    []int64
	data     []byte
	// mapped: data lies in a file mapping (a tensorfile tensor, a
	// shared-memory region) that another process may cut short, so it is
	// copied into the message under a fault guard (see outInfer.mapped).
	mapped bool
}

// mappedProducer is a producer that can tell whether its tensor is a
// view of a file mapping: tensorfile's Tensor.
type mappedProducer interface {
	Mapped() bool
}

// take takes p's tensor to send it as what ("input", "output") name. A
// compact CPU tensor is sent from its own memory; any other layout
// (strided, transposed, broadcast) is made compact once, by a copy. On
// error nothing is held.
func take(what, name string, p dlpack.Producer) (taken, error) {
	switch t := p.(type) {
	case *BytesTensor:
		if t == nil {
			break
		}
		data, err := t.encode(fmt.Sprintf("%s %q", what, name))
		if err != nil {
			return taken{}, err
		}
		return taken{release: func() {}, datatype: BYTES, shape: append([]int64{}, t.Shape...), data: data}, nil
	case *Tensor:
		if t == nil {
			break
		}
		// A received tensor handed on (a model's input as its output):
		// its bytes as they are, whatever their alignment, which sending
		// does not need.
		release, err := t.Hold()
		if err != nil {
			return taken{}, fmt.Errorf("%s %q: %w", what, name, err)
		}
		data := t.Bytes()
		if t.datatype == BYTES && data == nil {
			// it came as bytes_contents: laid out once
			data = appendBytes(nil, t.elems)
		}
		return taken{release: release, datatype: t.datatype, shape: t.Shape(), data: data, mapped: t.ReadOnly()}, nil
	}
	f, err := dlpack.From(p, dlpack.RequireDevice(dlpack.CPUDevice))
	if err != nil {
		return taken{}, fmt.Errorf("%s %q: %w", what, name, err)
	}
	if !f.IsContiguous() {
		g, err := dlpack.FromRequest(f, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways})
		f.Close()
		if err != nil {
			return taken{}, fmt.Errorf("%s %q: a compact copy: %w", what, name, err)
		}
		if f = g; !f.IsContiguous() {
			f.Close()
			return taken{}, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: strides", what, name), Value: f.Strides(), Err: dlpack.ErrLayout}
		}
	}
	datatype, err := DatatypeOf(f.DataType())
	if err != nil {
		f.Close()
		return taken{}, fmt.Errorf("%s %q: %w", what, name, err)
	}
	t := taken{release: func() { f.Close() }, datatype: datatype, shape: f.Shape()}
	if mp, ok := p.(mappedProducer); ok && mp.Mapped() {
		t.mapped = true
	}
	if n := f.NBytes(); n > 0 {
		b, first, err := dlpack.ReadOnlyBytes(f)
		if err != nil {
			f.Close()
			return taken{}, fmt.Errorf("%s %q: %w", what, name, err)
		}
		t.data = b[first : first+int(n)]
	} else {
		t.data = []byte{}
	}
	return t, nil
}

// closeAll releases the tensors taken.
func closeAll(ts []taken) {
	for _, t := range ts {
		t.release()
	}
}

// wireTensor is a tensor of a received message before its contents are
// placed: an InferInputTensor or InferOutputTensor.
type wireTensor struct {
	name     string
	datatype string
	shape    []int64
	params   map[string]*pb.InferParameter
	contents *pb.InferTensorContents
}

// hasValues reports whether c holds any typed values.
func hasValues(c *pb.InferTensorContents) bool {
	return c != nil && (len(c.BoolContents) > 0 || len(c.IntContents) > 0 || len(c.Int64Contents) > 0 ||
		len(c.UintContents) > 0 || len(c.Uint64Contents) > 0 || len(c.Fp32Contents) > 0 ||
		len(c.Fp64Contents) > 0 || len(c.BytesContents) > 0)
}

// shmPlacer places the tensors of a message that lie in shared memory:
// is tells which do, make makes one (emptyRaw: the message has an empty
// raw entry for it, as a response from Triton says that it wrote the
// output into its region).
type shmPlacer struct {
	is   func(w wireTensor) bool
	make func(w wireTensor, emptyRaw bool) (*Tensor, error)
	// rawToo: the raw contents have an (empty) entry for each tensor in
	// shared memory too, as responses do (Triton keeps the entries in
	// step with the outputs); requests have entries only for the others.
	rawToo bool
}

// place gives each tensor of a received message its memory: shared
// memory (shm, may be nil), raw contents in order (in's, each freed once
// its Tensor is released), or typed contents. what is "input" or
// "output", rawField the message's raw field name. On error every
// tensor made is released; the raw contents no tensor took are freed.
func place(what, rawField string, ws []wireTensor, in *inInfer, shm *shmPlacer) (ts []*Tensor, err error) {
	defer in.freeRest()
	raws := in.raws
	defer func() {
		if err != nil {
			for _, t := range ts {
				t.Close()
			}
			ts = nil
		}
	}()
	seen := make(map[string]bool, len(ws))
	plain := 0
	inShm := make([]bool, len(ws))
	for i, w := range ws {
		if w.name == "" {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%ss[%d].name", what, i), Value: `""`, Err: ErrInvalid, Why: "every " + what + " needs a name"}
		}
		if seen[w.name] {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("%ss[%d].name", what, i), Value: fmt.Sprintf("%q", w.name), Err: ErrInvalid, Why: "the name is given twice"}
		}
		seen[w.name] = true
		if inShm[i] = shm != nil && shm.is(w); !inShm[i] || shm.rawToo {
			plain++
		}
	}
	if len(raws) > 0 && len(raws) != plain {
		why := fmt.Sprintf("raw contents must be given for all %d %ss not in shared memory, or none", plain, what)
		if shm != nil && shm.rawToo {
			why = fmt.Sprintf("raw contents must be given for all %d %ss, or none", plain, what)
		}
		return nil, &dlpack.FieldError{Field: rawField, Value: fmt.Sprintf("%d entries", len(raws)), Err: ErrInvalid, Why: why}
	}
	k := 0
	for i, w := range ws {
		var t *Tensor
		switch {
		case inShm[i]:
			emptyRaw := false
			if shm.rawToo && len(raws) > 0 {
				if len(raws[k]) > 0 {
					return ts, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: raw contents", what, w.name), Value: len(raws[k]), Err: ErrInvalid,
						Why: "the tensor was asked for in shared memory, and the server sent its bytes instead of writing them there"}
				}
				emptyRaw = true
				k++
			}
			if hasValues(w.contents) {
				return ts, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: contents", what, w.name), Value: "typed", Err: ErrInvalid,
					Why: "the tensor is in shared memory"}
			}
			if t, err = shm.make(w, emptyRaw); err != nil {
				return ts, err
			}
			ts = append(ts, t)
			continue
		case len(raws) > 0 && hasValues(w.contents):
			return ts, &dlpack.FieldError{Field: fmt.Sprintf("%s %q: contents", what, w.name), Value: "typed and raw", Err: ErrInvalid,
				Why: "a tensor travels in typed contents or in " + rawField + ", not both"}
		case len(raws) > 0:
			raw, free := in.take(k)
			k++
			if t, err = rawTensor(what, w, raw, false, free); err != nil && free != nil {
				free()
			}
		default:
			t, err = typed(what, w)
		}
		if err != nil {
			return ts, err
		}
		t.params = paramsOf(w.params)
		ts = append(ts, t)
	}
	return ts, nil
}

// typed decodes typed contents into a buffer of their own. The count of
// values is checked against the shape before the buffer is allocated:
// a shape is only what a peer declares, the values are what it sent.
func typed(what string, w wireTensor) (*Tensor, error) {
	if w.datatype == BYTES {
		return typedBytes(what, w)
	}
	dt, err := ParseDatatype(w.datatype)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, w.name, err)
	}
	n, err := byteSize(dt, w.shape)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, w.name, err)
	}
	elems := n / int64(dt.ItemSize())
	c := w.contents
	if c == nil {
		c = &pb.InferTensorContents{}
	}
	field := fmt.Sprintf("%s %q: contents", what, w.name)
	var got int
	var list string
	switch w.datatype {
	case "BOOL":
		got, list = len(c.BoolContents), "bool_contents"
	case "INT8", "INT16", "INT32":
		got, list = len(c.IntContents), "int_contents"
	case "INT64":
		got, list = len(c.Int64Contents), "int64_contents"
	case "UINT8", "UINT16", "UINT32":
		got, list = len(c.UintContents), "uint_contents"
	case "UINT64":
		got, list = len(c.Uint64Contents), "uint64_contents"
	case "FP32":
		got, list = len(c.Fp32Contents), "fp32_contents"
	case "FP64":
		got, list = len(c.Fp64Contents), "fp64_contents"
	default: // FP16, BF16: the protocol has no typed list for them
		if elems > 0 || hasValues(c) {
			return nil, &dlpack.FieldError{Field: field, Value: w.datatype, Err: ErrInvalid,
				Why: w.datatype + " travels only as raw contents"}
		}
	}
	if list != "" && int64(got) != elems {
		return nil, &dlpack.FieldError{Field: field + "." + list, Value: fmt.Sprintf("%d values", got), Err: ErrInvalid,
			Why: fmt.Sprintf("%s %v has %d elements", w.datatype, w.shape, elems)}
	}
	rangeErr := func(list string, i int, v any) error {
		return &dlpack.FieldError{Field: fmt.Sprintf("%s.%s[%d]", field, list, i), Value: v, Err: ErrInvalid, Why: "out of range for " + w.datatype}
	}
	b := []byte{}
	if n > 0 {
		b = dlpack.AlignedSlice[byte](int(n))
	}
	size := dt.ItemSize()
	switch w.datatype {
	case "BOOL":
		for i, v := range c.BoolContents {
			if v {
				b[i] = 1
			}
		}
	case "INT8", "INT16", "INT32":
		lim := int64(1) << (8*size - 1)
		for i, v := range c.IntContents {
			if int64(v) < -lim || int64(v) >= lim {
				return nil, rangeErr("int_contents", i, v)
			}
			putLE(b[i*size:], uint64(v), size)
		}
	case "INT64":
		for i, v := range c.Int64Contents {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
	case "UINT8", "UINT16", "UINT32":
		for i, v := range c.UintContents {
			if size < 4 && uint64(v) >= 1<<(8*size) {
				return nil, rangeErr("uint_contents", i, v)
			}
			putLE(b[i*size:], uint64(v), size)
		}
	case "UINT64":
		for i, v := range c.Uint64Contents {
			binary.LittleEndian.PutUint64(b[8*i:], v)
		}
	case "FP32":
		for i, v := range c.Fp32Contents {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	case "FP64":
		for i, v := range c.Fp64Contents {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
	}
	t, err := newTensor(what, w.name, w.datatype, w.shape, b, false, nil)
	if err != nil {
		return nil, err
	}
	t.copied = true
	return t, nil
}

// rawTensor makes a Tensor of the raw contents of w: a tensor's bytes,
// or a BYTES tensor's elements laid out in them. release, when set, runs
// once the Tensor is released; on error it is not run.
func rawTensor(what string, w wireTensor, raw []byte, readOnly bool, release func()) (*Tensor, error) {
	if w.datatype != BYTES {
		return newTensor(what, w.name, w.datatype, w.shape, raw, readOnly, release)
	}
	field := fmt.Sprintf("%s %q", what, w.name)
	elems, err := splitBytes(field, w.shape, raw)
	if err != nil {
		return nil, err
	}
	return newBytesTensor(w.name, w.shape, raw, elems, readOnly, release)
}

// typedBytes takes the bytes_contents of a BYTES tensor, one entry per
// element, as its elements (protobuf made them, within the message).
func typedBytes(what string, w wireTensor) (*Tensor, error) {
	field := fmt.Sprintf("%s %q", what, w.name)
	n, err := elements(w.shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	var elems [][]byte
	if w.contents != nil {
		elems = w.contents.BytesContents
		if hasValues(&pb.InferTensorContents{BoolContents: w.contents.BoolContents, IntContents: w.contents.IntContents, Int64Contents: w.contents.Int64Contents,
			UintContents: w.contents.UintContents, Uint64Contents: w.contents.Uint64Contents, Fp32Contents: w.contents.Fp32Contents, Fp64Contents: w.contents.Fp64Contents}) {
			return nil, &dlpack.FieldError{Field: field + ": contents", Value: "numbers", Err: ErrInvalid, Why: "BYTES travels in bytes_contents"}
		}
	}
	if int64(len(elems)) != n {
		return nil, &dlpack.FieldError{Field: field + ": contents.bytes_contents", Value: fmt.Sprintf("%d values", len(elems)), Err: ErrInvalid,
			Why: fmt.Sprintf("BYTES %v has %d elements", w.shape, n)}
	}
	t, err := newBytesTensor(w.name, w.shape, nil, elems, false, nil)
	if err != nil {
		return nil, err
	}
	t.copied = true
	return t, nil
}

func putLE(b []byte, v uint64, size int) {
	for j := range size {
		b[j] = byte(v >> (8 * j))
	}
}
