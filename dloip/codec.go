package dloip

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/fault"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec this one defers to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The wire codec. ModelInferRequest and ModelInferResponse carry each
// tensor as one bytes field (raw_input_contents, raw_output_contents)
// that protobuf-go would copy: into the message when sending, and, when
// receiving, into a slice of no particular alignment after gRPC has
// gathered the HTTP/2 frames into one buffer. This codec writes and
// reads those fields itself. Sending, every other field is marshalled by
// protobuf and each tensor's bytes are handed to gRPC as they are (a
// buffer of the producer's own memory, held until gRPC has written it);
// only the field tags and lengths, and tensors under zeroCopyPart, are
// copied. Receiving, each tensor's bytes are copied once, straight from
// gRPC's frame buffers into a 64-byte aligned buffer that the received
// Tensor then shares; the other fields are decoded by protobuf. Every
// other message goes to gRPC's proto codec.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

// Name is "proto": the content-subtype every peer speaks.
func (codec) Name() string { return "proto" }

// The raw-contents field numbers.
const (
	fieldRawInput  protowire.Number = 7 // ModelInferRequest.raw_input_contents
	fieldRawOutput protowire.Number = 6 // ModelInferResponse.raw_output_contents
)

// outInfer is a ModelInferRequest or ModelInferResponse to send: msg
// without its raw contents, which are raws, in order, in field.
type outInfer struct {
	msg   proto.Message
	field protowire.Number
	raws  [][]byte
	// mapped[i]: raws[i] lies in a file mapping that another process may
	// cut short; a read of a lost page faults (SIGBUS), which would kill
	// the process in gRPC's writer goroutine. Such raws are copied here,
	// on the marshalling goroutine, under a fault guard, into the message.
	mapped []bool
	// keep, when set, holds the memory of raws: large ones are then given
	// to gRPC without a copy, each holding a reference to keep.
	keep *holding
	// err is the error Marshal met (a mapped file cut short), for the
	// caller, which gRPC only hands a status.
	err error
	// base, when set, is keep's first reference (the call's own), which
	// Marshal drops once it has copied what it copies (see newResponse).
	base *baseRef
}

// inInfer is a received ModelInferRequest or ModelInferResponse: msg
// without its raw contents, which are raws, each a 64-byte aligned buffer
// of its own; frees[i], when set, gives raws[i] back to its pool (once
// no Tensor uses it).
type inInfer struct {
	msg   proto.Message
	field protowire.Number
	raws  [][]byte
	frees []func()
}

// zeroCopyPart: raw contents of at least this many bytes are handed to
// gRPC without a copy; smaller ones are cheaper to copy than to track.
const zeroCopyPart = 64 << 10

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*outInfer)
	if !ok {
		return c.proto.Marshal(v)
	}
	if f.base != nil {
		defer f.base.drop()
	}
	head := proto.Size(f.msg)
	size := head
	copied := func(i int) bool {
		return f.keep == nil || len(f.raws[i]) < zeroCopyPart || (i < len(f.mapped) && f.mapped[i])
	}
	for i, r := range f.raws {
		size += protowire.SizeTag(f.field) + protowire.SizeVarint(uint64(len(r)))
		if copied(i) {
			size += len(r)
		}
	}
	pool := mem.DefaultBufferPool()
	bp := pool.Get(size)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*bp)[:0], f.msg)
	if err != nil {
		pool.Put(bp)
		return nil, err
	}
	var out mem.BufferSlice
	for i, r := range f.raws {
		b = protowire.AppendTag(b, f.field, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(r)))
		if i < len(f.mapped) && f.mapped[i] && len(r) > 0 {

			err := fault.Guard(uintptr(unsafe.Pointer(unsafe.SliceData(r))), uintptr(len(r)), func() error {
				b = append(b, r...)
				return nil
			})
			if fe, ok := err.(*fault.Error); ok {
				pool.Put(bp)
				out.Free()
				f.err = &dlpack.FieldError{Field: "data", Value: fmt.Sprintf("byte %d of %d", fe.Offset, len(r)), Err: ErrTruncated,
					Why: "the tensor's file was cut short while mapped (another process truncated or rewrote it); the lost pages cannot be read"}
				return nil, f.err
			}
			continue
		}
		if copied(i) {
			b = append(b, r...)
			continue
		}
		*bp = b
		out = append(out, mem.NewBuffer(bp, pool), keepBuffer(r, f.keep))
		rest := 0
		for j, q := range f.raws[i+1:] {
			rest += protowire.SizeTag(f.field) + protowire.SizeVarint(uint64(len(q)))
			if copied(i + 1 + j) {
				rest += len(q)
			}
		}
		bp = pool.Get(rest)
		b = (*bp)[:0]
	}
	*bp = b
	if len(b) > 0 || len(out) == 0 {
		out = append(out, mem.NewBuffer(bp, pool))
	} else {
		pool.Put(bp)
	}
	return out, nil
}

// baseRef is the first reference to a holding, dropped once: by Marshal,
// or by a cleanup should the message never be marshalled.
type baseRef struct {
	h    *holding
	done atomic.Bool
}

func (b *baseRef) drop() {
	if b.done.CompareAndSwap(false, true) {
		b.h.drop()
	}
}

// newResponse makes a response to send whose tensors h holds: Marshal
// drops h's first reference, which the server's handler cannot do itself
// (gRPC marshals the response after the handler returns); should gRPC
// never marshal it, a cleanup drops it once the message is unreachable.
func newResponse(msg proto.Message, raws [][]byte, mapped []bool, h *holding) *outInfer {
	out := &outInfer{msg: msg, field: fieldRawOutput, raws: raws, mapped: mapped, keep: h, base: &baseRef{h: h}}
	runtime.AddCleanup(out, func(b *baseRef) { b.drop() }, out.base)
	return out
}

// holding counts the references to the memory of one message's raw
// contents: the call's own and one per buffer gRPC holds; the last drop
// runs release.
type holding struct {
	refs    atomic.Int64
	release func()
}

func newHolding(release func()) *holding {
	h := &holding{release: release}
	h.refs.Store(1)
	return h
}

func (h *holding) add() { h.refs.Add(1) }

func (h *holding) drop() {
	if h.refs.Add(-1) == 0 && h.release != nil {
		h.release()
	}
}

// keepBuffer makes a gRPC buffer of p (memory h holds) without copying
// it: h gains a reference that gRPC drops when it frees the buffer, after
// writing it out. Should gRPC lose the buffer without freeing it (a
// stream that fails while the bytes are queued), a cleanup drops the
// reference once the buffer is unreachable, so h is still released
// exactly once and never while gRPC may read p.
func keepBuffer(p []byte, h *holding) mem.Buffer {
	h.add()
	k := &kept{h: h}
	data := &p
	runtime.AddCleanup(data, func(k *kept) { k.Put(nil) }, k)
	return mem.NewBuffer(data, k)
}

// kept is the mem.BufferPool of one keepBuffer: putting it back drops
// the reference, once.
type kept struct {
	h    *holding
	done atomic.Bool
}

func (k *kept) Get(int) *[]byte { panic("dloip: kept.Get") }

func (k *kept) Put(*[]byte) {
	if k.done.CompareAndSwap(false, true) {
		k.h.drop()
	}
}

var errMessage = errors.New("dloip: malformed message")

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*inInfer)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	r := data.Reader()
	defer r.Close()
	// rest gathers every field but the raw contents, for protobuf.
	var rest []byte
	for r.Remaining() > 0 {
		tag, err := readVarint(r)
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		if num <= 0 {
			return fmt.Errorf("%w: field number %d", errMessage, num)
		}
		if num == f.field && typ == protowire.BytesType {
			n, err := readVarint(r)
			if err != nil {
				return err
			}
			if n > uint64(r.Remaining()) {
				return fmt.Errorf("%w: raw contents %d of %d bytes in a message of %d left", errMessage, len(f.raws), n, r.Remaining())
			}
			b := []byte{}
			var free func()
			if n > 0 {
				b, free = getBody(int(n))
				if _, err := io.ReadFull(r, b); err != nil {
					return fmt.Errorf("%w: %v", errMessage, err)
				}
			}
			f.raws = append(f.raws, b)
			f.frees = append(f.frees, free)
			continue
		}
		rest = protowire.AppendVarint(rest, tag)
		switch typ {
		case protowire.VarintType:
			x, err := readVarint(r)
			if err != nil {
				return err
			}
			rest = protowire.AppendVarint(rest, x)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := 4
			if typ == protowire.Fixed64Type {
				n = 8
			}
			if rest, err = readN(r, rest, uint64(n)); err != nil {
				return err
			}
		case protowire.BytesType:
			n, err := readVarint(r)
			if err != nil {
				return err
			}
			rest = protowire.AppendVarint(rest, n)
			if rest, err = readN(r, rest, n); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: wire type %d of field %d", errMessage, typ, num)
		}
	}
	if err := proto.Unmarshal(rest, f.msg); err != nil {
		return fmt.Errorf("%w: %v", errMessage, err)
	}
	return nil
}

// readN appends the next n bytes of r to b.
func readN(r *mem.Reader, b []byte, n uint64) ([]byte, error) {
	if n > uint64(r.Remaining()) {
		return b, fmt.Errorf("%w: a field of %d bytes in a message of %d left", errMessage, n, r.Remaining())
	}
	start := len(b)
	b = append(b, make([]byte, n)...)
	if _, err := io.ReadFull(r, b[start:]); err != nil {
		return b, fmt.Errorf("%w: %v", errMessage, err)
	}
	return b, nil
}

func readVarint(r *mem.Reader) (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: truncated varint", errMessage)
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: varint overflows", errMessage)
}
