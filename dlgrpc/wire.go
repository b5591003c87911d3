package dlgrpc

import (
	"fmt"
	"io"
	"slices"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/fault"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The wire. A tensor service's large messages carry each tensor as one
// bytes field (Flight's FlightData.data_body, the inference protocol's
// raw_input_contents and raw_output_contents) that protobuf-go would
// copy: into the message when sending, and, when receiving, into a slice
// of no particular alignment after gRPC has gathered the HTTP/2 frames
// into one buffer. The services' codec leaves those messages to Writer
// and Decode. Sending, every other field is marshalled by protobuf and
// each tensor's bytes are handed to gRPC as they are, a buffer of the
// producer's own memory held until gRPC has written it; only field tags
// and lengths and small parts are copied. Receiving, each tensor's bytes
// are copied once, straight from gRPC's frame buffers into a 64-byte
// aligned buffer that the received Tensor then shares; every other field
// goes to protobuf, which decides what the message means.

// ZeroCopyPart is the size from which tensor parts are handed to gRPC
// without a copy; smaller ones are cheaper to copy than to track.
const ZeroCopyPart = 64 << 10

// Marshaler is a message that writes its own wire form: the services'
// codec calls MarshalWire instead of protobuf's Marshal.
type Marshaler interface {
	MarshalWire() (mem.BufferSlice, error)
}

// Unmarshaler is a message that reads its own wire form: the services'
// codec calls UnmarshalWire instead of protobuf's Unmarshal.
type Unmarshaler interface {
	UnmarshalWire(data mem.BufferSlice) error
}

// Writer builds the wire form of a message whose tensor bytes gRPC
// sends from their own memory. Fields are written in the order they are
// added.
type Writer struct {
	hold *Hold
	ops  []op
}

type op struct {
	num    protowire.Number // 0: msg's fields at the top level
	msg    proto.Message
	b      []byte   // a bytes field, copied
	parts  [][]byte // a tensor field
	mapped []byte   // the file mapping parts lie in, if any
	tensor bool
	sub    *Writer // a message field that a Writer of its own builds
	size   int     // msg's size, or sub's
}

// NewWriter makes a Writer. With hold, tensor parts of ZeroCopyPart
// bytes or more go to gRPC without a copy, each keeping a reference to
// hold until gRPC frees it; without, every byte is copied.
func NewWriter(hold *Hold) *Writer { return &Writer{hold: hold} }

// Message adds m's fields, marshalled by protobuf.
func (w *Writer) Message(m proto.Message) { w.ops = append(w.ops, op{msg: m}) }

// Field adds the message field num holding m.
func (w *Writer) Field(num protowire.Number, m proto.Message) {
	w.ops = append(w.ops, op{num: num, msg: m})
}

// Nested adds the message field num whose fields the returned Writer
// adds (its Message, Tensor, Nested, ...), in the order they are added
// to it, until Marshal: a message that wraps one with tensor fields (an
// inference stream's response wraps a response whose raw contents are
// tensors) keeps those tensors' bytes in their own memory too. The
// returned Writer shares w's hold; it is marshalled as part of w, not
// on its own.
func (w *Writer) Nested(num protowire.Number) *Writer {
	sub := &Writer{hold: w.hold}
	w.ops = append(w.ops, op{num: num, sub: sub})
	return sub
}

// Bytes adds the bytes field num holding b, copied.
func (w *Writer) Bytes(num protowire.Number, b []byte) {
	w.ops = append(w.ops, op{num: num, b: b})
}

// Tensor adds the bytes field num whose value is parts, concatenated.
// mapped, when set, is the file mapping the parts lie in (a tensorfile
// tensor, a shared-memory region): another process may cut the file
// short, and a read of a lost page faults (SIGBUS), which would kill the
// process in gRPC's writer goroutine. Such parts are copied by Marshal,
// on its goroutine, under a fault guard: a fault fails Marshal with an
// error wrapping ErrTruncated.
func (w *Writer) Tensor(num protowire.Number, parts [][]byte, mapped []byte) {
	w.ops = append(w.ops, op{num: num, parts: parts, mapped: mapped, tensor: true})
}

func (w *Writer) zeroCopy(o *op, p []byte) bool {
	return w.hold != nil && o.mapped == nil && len(p) >= ZeroCopyPart
}

func partsLen(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// size is the size of the message w builds, each message's and nested
// Writer's size kept in its op.
func (w *Writer) size() int {
	n := 0
	for i := range w.ops {
		o := &w.ops[i]
		switch {
		case o.tensor:
			k := partsLen(o.parts)
			n += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(k)) + k
		case o.sub != nil:
			o.size = o.sub.size()
			n += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(o.size)) + o.size
		case o.msg != nil:
			o.size = proto.Size(o.msg)
			n += o.size
			if o.num != 0 {
				n += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(o.size))
			}
		default:
			n += protowire.SizeTag(o.num) + protowire.SizeBytes(len(o.b))
		}
	}
	return n
}

// plan adds to runs, the bytes copied before each part given to gRPC as
// it is (and after the last one), what w's fields copy (sizes known).
func (w *Writer) plan(runs []int) []int {
	for i := range w.ops {
		o := &w.ops[i]
		switch {
		case o.tensor:
			runs[len(runs)-1] += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(partsLen(o.parts)))
			for _, p := range o.parts {
				if w.zeroCopy(o, p) {
					runs = append(runs, 0)
				} else {
					runs[len(runs)-1] += len(p)
				}
			}
		case o.sub != nil:
			runs[len(runs)-1] += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(o.size))
			runs = o.sub.plan(runs)
		case o.msg != nil:
			runs[len(runs)-1] += o.size
			if o.num != 0 {
				runs[len(runs)-1] += protowire.SizeTag(o.num) + protowire.SizeVarint(uint64(o.size))
			}
		default:
			runs[len(runs)-1] += protowire.SizeTag(o.num) + protowire.SizeBytes(len(o.b))
		}
	}
	return runs
}

// marshalling is the state of one Marshal: the buffers made so far and
// the one being filled, sized by the plan.
type marshalling struct {
	pool mem.BufferPool
	runs []int
	run  int
	bp   *[]byte
	b    []byte
	out  mem.BufferSlice
}

// Marshal makes the message's wire form. On error nothing is held.
func (w *Writer) Marshal() (mem.BufferSlice, error) {
	w.size()
	m := &marshalling{pool: mem.DefaultBufferPool(), runs: w.plan([]int{0})}
	m.bp = m.pool.Get(m.runs[0])
	m.b = (*m.bp)[:0]
	if err := w.emit(m); err != nil {
		m.pool.Put(m.bp)
		m.out.Free()
		return nil, err
	}
	*m.bp = m.b
	if len(m.b) > 0 || len(m.out) == 0 {
		m.out = append(m.out, mem.NewBuffer(m.bp, m.pool))
	} else {
		m.pool.Put(m.bp)
	}
	return m.out, nil
}

// emit writes w's fields: copied into the buffer being filled, or, for a
// large tensor part, handed to gRPC as it is.
func (w *Writer) emit(m *marshalling) error {
	for i := range w.ops {
		o := &w.ops[i]
		switch {
		case o.tensor:
			m.b = protowire.AppendTag(m.b, o.num, protowire.BytesType)
			m.b = protowire.AppendVarint(m.b, uint64(partsLen(o.parts)))
			if o.mapped != nil {
				base := uintptr(unsafe.Pointer(unsafe.SliceData(o.mapped)))
				err := fault.Guard(base, uintptr(len(o.mapped)), func() error {
					for _, p := range o.parts {
						m.b = append(m.b, p...)
					}
					return nil
				})
				if fe, ok := err.(*fault.Error); ok {
					return &dlpack.FieldError{Field: "data", Value: fmt.Sprintf("byte %d of %d", fe.Offset, len(o.mapped)), Err: ErrTruncated,
						Why: "the tensor's file was cut short while mapped (another process truncated or rewrote it); the lost pages cannot be read"}
				}
				continue
			}
			for _, p := range o.parts {
				if !w.zeroCopy(o, p) {
					m.b = append(m.b, p...)
					continue
				}
				if len(m.b) > 0 {
					*m.bp = m.b
					m.out = append(m.out, mem.NewBuffer(m.bp, m.pool))
				} else {
					m.pool.Put(m.bp)
				}
				m.out = append(m.out, keepBuffer(p, w.hold))
				m.run++
				m.bp = m.pool.Get(m.runs[m.run])
				m.b = (*m.bp)[:0]
			}
		case o.sub != nil:
			m.b = protowire.AppendTag(m.b, o.num, protowire.BytesType)
			m.b = protowire.AppendVarint(m.b, uint64(o.size))
			if err := o.sub.emit(m); err != nil {
				return err
			}
		case o.msg != nil:
			if o.num != 0 {
				m.b = protowire.AppendTag(m.b, o.num, protowire.BytesType)
				m.b = protowire.AppendVarint(m.b, uint64(o.size))
			}
			var err error
			if m.b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(m.b, o.msg); err != nil {
				return err
			}
		default:
			m.b = protowire.AppendTag(m.b, o.num, protowire.BytesType)
			m.b = protowire.AppendBytes(m.b, o.b)
		}
	}
	return nil
}

// Decode reads the wire form of a message whose field tensor (a bytes
// field, repeated or not) carries tensor bytes. Each value of that field
// is read into the buffer body returns for its length, which Decode has
// checked against what the message holds before calling it (body may
// refuse it: a limit, say, with an error Decode returns as it is); every
// other field is gathered, in order, and unmarshalled into rest by
// protobuf. What Decode accepts is exactly what protobuf's decoder
// accepts (varints of at most ten bytes, the tenth at most 1; lengths
// within the message; field numbers 1 to 2^29-1; wire types 0 to 5;
// groups closed by their own number); anything else fails with an error
// wrapping ErrMalformed. On error, the buffers body gave are the caller's
// to free.
func Decode(data mem.BufferSlice, tensor protowire.Number, body func(n int) ([]byte, error), rest proto.Message) error {
	return DecodePath(data, []protowire.Number{tensor}, body, rest)
}

// DecodePath is Decode for a message whose tensor field lies in a
// message field: path names the message fields from the outer message
// in, and last the tensor field (an inference stream's response:
// infer_response, then its raw_output_contents). Every value of the
// tensor field, in whichever occurrence of the fields on the path it
// lies, is read into body's buffer, in the order of the message; the
// rest of each occurrence goes to protobuf as it came (each length
// checked against the message that holds it), and protobuf merges the
// occurrences as it always does, so the values come in the order
// protobuf would list them. A path of one field is Decode.
func DecodePath(data mem.BufferSlice, path []protowire.Number, body func(n int) ([]byte, error), rest proto.Message) error {
	if len(path) == 0 {
		return fmt.Errorf("dlgrpc: DecodePath: an empty path")
	}
	r := data.Reader()
	defer r.Close()
	other, err := decodeFields(&limited{r: r, n: r.Remaining()}, path, body, nil)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(other, rest); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// decodeFields reads the fields of one message (what l holds): the
// values of the tensor field at the end of path go to body, those of
// the message field path[0] are read in turn, and everything else is
// appended to other, as it came.
func decodeFields(l *limited, path []protowire.Number, body func(n int) ([]byte, error), other []byte) ([]byte, error) {
	for l.n > 0 {
		// the tag's bytes as they came, for protobuf to read as they
		// came (a tag may be written with more bytes than it needs)
		start := len(other)
		var tag uint64
		var err error
		if tag, other, err = readVarintRaw(l, other); err != nil {
			return other, err
		}
		if tag>>3 < uint64(protowire.MinValidNumber) || tag>>3 > uint64(protowire.MaxValidNumber) {
			return other, fmt.Errorf("%w: field number %d", ErrMalformed, tag>>3)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if num != path[0] || typ != protowire.BytesType {
			if other, err = copyValue(l, other, typ, num); err != nil {
				return other, err
			}
			continue
		}
		n, err := readVarint(l)
		if err != nil {
			return other, err
		}
		if n > uint64(l.n) {
			return other, fmt.Errorf("%w: field %d declares %d bytes, and the message has %d left", ErrMalformed, num, n, l.n)
		}
		if len(path) == 1 {
			other = other[:start]
			b, err := body(int(n))
			if err != nil {
				return other, err
			}
			if _, err := io.ReadFull(l, b); err != nil {
				return other, fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			continue
		}
		// a message on the path: its own fields, within its length, and
		// then its rest as the value of the field
		inner := &limited{r: l.r, n: int(n)}
		l.n -= int(n)
		rest, err := decodeFields(inner, path[1:], body, nil)
		if err != nil {
			return other, err
		}
		other = protowire.AppendVarint(other, uint64(len(rest)))
		other = append(other, rest...)
	}
	return other, nil
}

// limited reads at most n more bytes of r: the rest of one message.
type limited struct {
	r *mem.Reader
	n int
}

func (l *limited) ReadByte() (byte, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	c, err := l.r.ReadByte()
	if err == nil {
		l.n--
	}
	return c, err
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= k
	return k, err
}

// copyValue appends the value of a field of type typ (its tag read) to
// b, byte for byte, as protowire.ConsumeFieldValue delimits it; a group
// is copied up to its end, whatever it holds, for protobuf to judge.
func copyValue(r *limited, b []byte, typ protowire.Type, num protowire.Number) ([]byte, error) {
	var groups []protowire.Number
	for {
		var err error
		switch typ {
		case protowire.VarintType:
			_, b, err = readVarintRaw(r, b)
		case protowire.Fixed32Type:
			b, err = readN(r, b, 4)
		case protowire.Fixed64Type:
			b, err = readN(r, b, 8)
		case protowire.BytesType:
			var n uint64
			if n, b, err = readVarintRaw(r, b); err == nil {
				b, err = readN(r, b, n)
			}
		case protowire.StartGroupType:
			groups = append(groups, num)
		case protowire.EndGroupType:
			if len(groups) == 0 || groups[len(groups)-1] != num {
				return b, fmt.Errorf("%w: an end of group %d that no group opened", ErrMalformed, num)
			}
			groups = groups[:len(groups)-1]
		default:
			return b, fmt.Errorf("%w: wire type %d of field %d", ErrMalformed, typ, num)
		}
		if err != nil {
			return b, err
		}
		if len(groups) == 0 {
			return b, nil
		}
		// the next field inside the group: its number may be any of
		// int32's (protowire.ConsumeTag), not only a valid one
		var tag uint64
		if tag, b, err = readVarintRaw(r, b); err != nil {
			return b, err
		}
		if tag>>3 < uint64(protowire.MinValidNumber) || tag>>3 > uint64(1<<31-1) {
			return b, fmt.Errorf("%w: field number %d in group %d", ErrMalformed, tag>>3, groups[len(groups)-1])
		}
		num, typ = protowire.Number(tag>>3), protowire.Type(tag&7)
	}
}

// readN appends the next n bytes of r to b.
func readN(r *limited, b []byte, n uint64) ([]byte, error) {
	if n > uint64(r.n) {
		return b, fmt.Errorf("%w: a field of %d bytes, and the message has %d left", ErrMalformed, n, r.n)
	}
	start := len(b)
	b = slices.Grow(b, int(n))[:start+int(n)]
	if _, err := io.ReadFull(r, b[start:]); err != nil {
		return b, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b, nil
}

// readVarint reads a varint as protobuf does: at most ten bytes, the
// tenth no more than 1 (protowire.ConsumeVarint).
func readVarint(r *limited) (uint64, error) {
	x, _, err := readVarintRaw(r, nil)
	return x, err
}

// readVarintRaw reads a varint as readVarint does, appending its bytes,
// as they were (a varint may be written with more bytes than it needs),
// to b.
func readVarintRaw(r *limited, b []byte) (uint64, []byte, error) {
	var x uint64
	for i := range 10 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, b, fmt.Errorf("%w: truncated varint", ErrMalformed)
		}
		if i == 9 && c > 1 {
			break
		}
		b = append(b, c)
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, b, nil
		}
	}
	return 0, b, fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed)
}
