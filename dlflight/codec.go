package dlflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/fault"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec this one defers to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The wire codec. Flight's messages are protobuf; FlightData's body is a
// bytes field (number 1000) that protobuf-go would copy into a Go slice of
// whatever alignment the allocator gives, after gRPC has already gathered
// the HTTP/2 frames into one buffer. This codec reads FlightData itself:
// the small fields are decoded from the frames, and the body is copied once,
// straight from gRPC's frame buffers into a 64-byte aligned buffer of the
// caller's allocator, which the record batch then shares. Sending, it
// hands the IPC body's large buffers (the tensor's own memory) to gRPC
// as they are, holding the tensor until gRPC has written them; only the
// fields and the padding are copied. Every other message goes to gRPC's
// proto codec.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

// Name is "proto": the content-subtype every Flight peer speaks.
func (codec) Name() string { return "proto" }

// Field numbers of arrow.flight.protocol.FlightData.
const (
	fieldDescriptor  = 1
	fieldDataHeader  = 2
	fieldAppMetadata = 3
	fieldDataBody    = 1000
)

// outFrame is a FlightData to send whose body is the concatenation of
// parts (the IPC body buffers and their padding), not copied before the
// codec.
type outFrame struct {
	desc    *flight.FlightDescriptor
	header  []byte
	appMeta []byte
	body    [][]byte
	// keep, when set, holds the memory of body: large parts are then
	// given to gRPC without a copy, each holding a reference to keep.
	keep *sending
	// guard, when set, is the memory of a file mapping that body lies in
	// (a tensorfile tensor): every part is then copied, in Marshal, with a
	// fault of a file cut short turned into err.
	guard []byte
	err   error
}

// inFrame is a received FlightData whose body, if any, is a buffer of
// alloc (64-byte aligned) that the receiver must Release.
type inFrame struct {
	alloc   memory.Allocator
	desc    *flight.FlightDescriptor
	header  []byte
	appMeta []byte
	body    *memory.Buffer
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*outFrame)
	if !ok {
		return c.proto.Marshal(v)
	}
	var desc []byte
	if f.desc != nil {
		var err error
		if desc, err = proto.Marshal(f.desc); err != nil {
			return nil, err
		}
	}
	bodyLen := 0
	for _, p := range f.body {
		bodyLen += len(p)
	}
	size := 0
	if desc != nil {
		size += protowire.SizeTag(fieldDescriptor) + protowire.SizeBytes(len(desc))
	}
	if len(f.header) > 0 {
		size += protowire.SizeTag(fieldDataHeader) + protowire.SizeBytes(len(f.header))
	}
	if len(f.appMeta) > 0 {
		size += protowire.SizeTag(fieldAppMetadata) + protowire.SizeBytes(len(f.appMeta))
	}
	zeroCopy := f.keep != nil && f.guard == nil
	for _, p := range f.body {
		if !zeroCopy || len(p) < zeroCopyPart {
			size += len(p)
		}
	}
	if bodyLen > 0 {
		size += protowire.SizeTag(fieldDataBody) + protowire.SizeVarint(uint64(bodyLen))
	}
	// The fields and the small body parts (padding, bitmaps) are copied
	// into pooled buffers; a large part (the tensor's values) goes to
	// gRPC as it is, holding f.keep until gRPC has written it.
	var out mem.BufferSlice
	pool := mem.DefaultBufferPool()
	bp := pool.Get(size)
	b := (*bp)[:0]
	if desc != nil {
		b = protowire.AppendTag(b, fieldDescriptor, protowire.BytesType)
		b = protowire.AppendBytes(b, desc)
	}
	if len(f.header) > 0 {
		b = protowire.AppendTag(b, fieldDataHeader, protowire.BytesType)
		b = protowire.AppendBytes(b, f.header)
	}
	if len(f.appMeta) > 0 {
		b = protowire.AppendTag(b, fieldAppMetadata, protowire.BytesType)
		b = protowire.AppendBytes(b, f.appMeta)
	}
	if bodyLen > 0 {
		b = protowire.AppendTag(b, fieldDataBody, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(bodyLen))
	}
	if f.guard != nil {
		// The parts lie in a file mapping: copy them here, on the
		// sending goroutine, where a fault can be caught (gRPC's writer
		// goroutine cannot), rather than hand them to gRPC.
		base := uintptr(unsafe.Pointer(unsafe.SliceData(f.guard)))
		err := fault.Guard(base, uintptr(len(f.guard)), func() error {
			for _, p := range f.body {
				b = append(b, p...)
			}
			return nil
		})
		if fe, ok := err.(*fault.Error); ok {
			pool.Put(bp)
			f.err = &dlpack.FieldError{Field: "data", Value: fmt.Sprintf("byte %d of %d", fe.Offset, len(f.guard)), Err: ErrTruncated,
				Why: "the tensor's file was cut short while mapped (another process truncated or rewrote it); the lost pages cannot be read"}
			return nil, f.err
		}
		*bp = b
		return mem.BufferSlice{mem.NewBuffer(bp, pool)}, nil
	}
	for i, p := range f.body {
		if f.keep == nil || len(p) < zeroCopyPart {
			b = append(b, p...)
			continue
		}
		if len(b) > 0 {
			*bp = b
			out = append(out, mem.NewBuffer(bp, pool))
			small := 0
			for _, q := range f.body[i+1:] {
				small += len(q)
			}
			bp = pool.Get(small)
			b = (*bp)[:0]
		}
		out = append(out, keepBuffer(p, f.keep))
	}
	*bp = b
	if len(b) > 0 || len(out) == 0 {
		out = append(out, mem.NewBuffer(bp, pool))
	} else {
		pool.Put(bp)
	}
	return out, nil
}

// zeroCopyPart: body parts of at least this many bytes are handed to gRPC
// without a copy; smaller ones are cheaper to copy than to track.
const zeroCopyPart = 64 << 10

// keepBuffer makes a gRPC buffer of p (memory s holds) without copying
// it: s's entry gains a reference that gRPC drops when it frees the
// buffer, after writing it out. Should gRPC lose the buffer without
// freeing it (a stream or connection that fails while the bytes are
// queued), a cleanup drops the reference once the buffer is unreachable,
// so the entry is still released exactly once and never while gRPC may
// read p.
func keepBuffer(p []byte, s *sending) mem.Buffer {
	s.add()
	k := &kept{s: s}
	data := &p
	runtime.AddCleanup(data, func(k *kept) { k.Put(nil) }, k)
	return mem.NewBuffer(data, k)
}

// kept is the mem.BufferPool of one keepBuffer: putting it back drops the
// reference, once.
type kept struct {
	s    *sending
	done atomic.Bool
}

func (k *kept) Get(int) *[]byte { panic("dlflight: kept.Get") }

func (k *kept) Put(*[]byte) {
	if k.done.CompareAndSwap(false, true) {
		k.s.done()
	}
}

// sending counts the buffers of one call's sends that gRPC still holds,
// each a reference to the sent entry.
type sending struct {
	e    *entry
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
	// progress counts the messages gRPC took and the buffers it wrote
	// out (Server.watchStall).
	progress atomic.Int64
	// all, when set, counts the buffers gRPC holds across every call of
	// a server (Shutdown waits for them).
	all *atomic.Int64
}

func newSending(e *entry) *sending { return &sending{e: e} }

// pending is how many buffers gRPC still holds.
func (s *sending) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *sending) add() {
	s.e.refs.Add(1)
	if s.all != nil {
		s.all.Add(1)
	}
	s.mu.Lock()
	if s.n == 0 {
		s.idle = make(chan struct{})
	}
	s.n++
	s.mu.Unlock()
}

func (s *sending) done() {
	s.progress.Add(1)
	s.e.drop()
	if s.all != nil {
		s.all.Add(-1)
	}
	s.mu.Lock()
	if s.n--; s.n == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// wait returns once gRPC has written (and freed) every buffer sent, or
// ctx ends: a call that ends waits for it, so that a tensor unregistered
// or put is released by the time its peer sees the call end. A failed
// stream may leave buffers to the cleanup; ctx ends with it.
func (s *sending) wait(ctx context.Context) {
	s.mu.Lock()
	n, idle := s.n, s.idle
	s.mu.Unlock()
	if n == 0 {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

var errFrame = errors.New("dlflight: malformed FlightData")

func (c codec) Unmarshal(data mem.BufferSlice, v any) (err error) {
	f, ok := v.(*inFrame)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	r := data.Reader()
	defer r.Close()
	defer func() {
		if err != nil && f.body != nil {
			f.body.Release()
			f.body = nil
		}
	}()
	for r.Remaining() > 0 {
		tag, err := readVarint(r)
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		if num <= 0 {
			return fmt.Errorf("%w: field number %d", errFrame, num)
		}
		if typ != protowire.BytesType {
			if err := skipField(r, typ); err != nil {
				return err
			}
			continue
		}
		n, err := readVarint(r)
		if err != nil {
			return err
		}
		if n > uint64(r.Remaining()) {
			return fmt.Errorf("%w: field %d of %d bytes in a message of %d left", errFrame, num, n, r.Remaining())
		}
		switch num {
		case fieldDataBody:
			if f.body != nil {
				f.body.Release()
			}
			if p, ok := f.alloc.(*placer); ok {
				p.next = int(n)
			}
			f.body = memory.NewResizableBuffer(f.alloc)
			f.body.Resize(int(n))
			if _, err := io.ReadFull(r, f.body.Bytes()); err != nil {
				return err
			}
		case fieldDescriptor, fieldDataHeader, fieldAppMetadata:
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				return err
			}
			switch num {
			case fieldDescriptor:
				f.desc = new(flight.FlightDescriptor)
				if err := proto.Unmarshal(b, f.desc); err != nil {
					return fmt.Errorf("%w: flight_descriptor: %v", errFrame, err)
				}
			case fieldDataHeader:
				f.header = b
			default:
				f.appMeta = b
			}
		default:
			if _, err := r.Discard(int(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

func readVarint(r *mem.Reader) (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: truncated varint", errFrame)
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: varint overflows", errFrame)
}

func skipField(r *mem.Reader, typ protowire.Type) error {
	var n int
	switch typ {
	case protowire.VarintType:
		_, err := readVarint(r)
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	default:
		return fmt.Errorf("%w: wire type %d", errFrame, typ)
	}
	if _, err := r.Discard(n); err != nil {
		return fmt.Errorf("%w: truncated field", errFrame)
	}
	return nil
}
