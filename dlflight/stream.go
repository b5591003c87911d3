package dlflight

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/internal/arrowfb"
	"google.golang.org/protobuf/proto"
)

// errLimit is ErrLimit.
var errLimit = ErrLimit

// frameReader is the ipc.MessageReader of a received stream: each frame's
// header and aligned body become one IPC message. Frames with no header
// (app metadata only) are skipped.
type frameReader struct {
	recv    func(*inFrame) error
	alloc   memory.Allocator
	maxBody int64 // total body and header bytes allowed; 0: no limit
	body    int64
	desc    *flight.FlightDescriptor
	msg     *ipc.Message
	recvErr error // the transport's error, as opposed to a malformed stream
	bodies  []*memory.Buffer
	refs    atomic.Int64
	// budget, when set, counts every body and header received (a
	// server's MaxStoredBytes); taken is what this stream took of it.
	budget *budget
	taken  int64
}

func newFrameReader(recv func(*inFrame) error, alloc memory.Allocator, maxBody int64) *frameReader {
	r := &frameReader{recv: recv, alloc: alloc, maxBody: maxBody}
	r.refs.Store(1)
	return r
}

func (r *frameReader) Message() (*ipc.Message, error) {
	for {
		f := &inFrame{alloc: r.alloc}
		if err := r.recv(f); err != nil {
			if !errors.Is(err, io.EOF) {
				r.recvErr = err
			}
			return nil, err
		}
		if f.err != nil {
			return nil, f.err
		}
		if f.desc != nil && r.desc == nil {
			r.desc = f.desc
		}
		// headers count too: a stream of empty batches is not free
		r.body += int64(len(f.header))
		if f.body != nil {
			r.body += int64(f.body.Len())
			if recvHook != nil {
				recvHook(f.body.Bytes())
			}
		}
		if r.maxBody > 0 && r.body > r.maxBody {
			if f.body != nil {
				f.body.Release()
			}
			return nil, fmt.Errorf("%w: more than %d bytes (message bodies and headers) in one stream (MaxTensorBytes)", errLimit, r.maxBody)
		}
		if r.budget != nil {
			n := int64(len(f.header))
			if f.body != nil {
				n += int64(f.body.Len())
			}
			if !r.budget.take(n) {
				if f.body != nil {
					f.body.Release()
				}
				return nil, fmt.Errorf("%w: what peers put holds %d bytes, and this stream %d more (MaxStoredBytes %d)", errLimit, r.budget.load(), n, r.budget.max)
			}
			r.taken += n
		}
		if len(f.header) == 0 {
			if f.body != nil {
				f.body.Release()
			}
			continue
		}
		if err := checkIPC(f.header); err != nil {
			if f.body != nil {
				f.body.Release()
			}
			return nil, err
		}
		if r.msg != nil {
			r.msg.Release()
		}
		body := f.body
		if body == nil {
			body = memory.NewBufferBytes(nil)
		}
		meta := memory.NewBufferBytes(f.header)
		r.msg = ipc.NewMessage(meta, body)
		body.Release()
		if f.body != nil {
			r.bodies = append(r.bodies, f.body)
		}
		return r.msg, nil
	}
}

func (r *frameReader) Retain() { r.refs.Add(1) }

func (r *frameReader) Release() {
	if r.refs.Add(-1) == 0 && r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
}

// reclaim frees the bodies of a failed stream that are still referenced.
// arrow-go's IPC reader recovers from a panic while building a batch out
// of a lying header (a buffer beyond the body) but leaves the references
// of the arrays it had built; those arrays are unreachable once the
// reader, its message and every batch taken from it are released, so
// their bodies go back to the allocator here.
func (r *frameReader) reclaim() {
	for _, b := range r.bodies {
		for b.Buf() != nil {
			b.Release()
		}
	}
}

// receive reads a whole tensor stream: the schema, then batches to the
// end. One batch is shared as it is; the batches of a split tensor are
// copied once into one aligned buffer of alloc.
func receive(r *frameReader, alloc memory.Allocator) (_ *Tensor, err error) {
	defer func() {
		if err != nil {
			r.reclaim()
		}
	}()
	defer r.Release()
	rdr, err := ipc.NewReaderFromMessageReader(r, ipc.WithAllocator(alloc))
	if err != nil {
		return nil, streamErr(r, err)
	}
	defer rdr.Release()
	l, err := checkSchema(rdr.Schema())
	if err != nil {
		return nil, err
	}
	var (
		recs   []arrow.RecordBatch
		pieces []piece
		rows   int64
	)
	defer func() {
		if err != nil {
			for _, rec := range recs {
				rec.Release()
			}
		}
	}()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		p, err := checkBatch(l, rec)
		if err != nil {
			return nil, err
		}
		rec.Retain()
		recs, pieces = append(recs, rec), append(pieces, p)
		rows += p.rows
		if rows < 0 || (l.rows >= 0 && rows > l.rows) {
			return nil, fmt.Errorf("%w: more rows than the %d of shape %v", ErrInvalid, l.rows, l.shape)
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, streamErr(r, err)
	}
	if l.rows < 0 {
		if l, err = layoutOf(l.dtype, append([]int64{rows}, l.rowShape...)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if rows != l.rows {
		return nil, fmt.Errorf("%w: %d rows arrived for shape %v", ErrInvalid, rows, l.shape)
	}
	var data []byte
	var release func()
	switch len(pieces) {
	case 0:
	case 1:
		data, release = pieces[0].data, recs[0].Release
	default:
		buf := memory.NewResizableBuffer(alloc)
		buf.Resize(int(l.nbytes))
		at := buf.Bytes()[:0]
		for _, p := range pieces {
			at = append(at, p.data...)
		}
		for _, rec := range recs {
			rec.Release()
		}
		recs = nil
		data, release = buf.Bytes()[:l.nbytes:l.nbytes], buf.Release
	}
	t, err := dlgrpc.NewTensor(l.dtype, l.shape, data, false, release)
	if err != nil {
		if release != nil && recs == nil {
			release()
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return t, nil
}

// streamErr tells a transport error (kept as gRPC reported it) from a
// malformed stream (ErrInvalid).
func streamErr(r *frameReader, err error) error {
	if r.recvErr != nil {
		return r.recvErr
	}
	if errors.Is(err, errLimit) || errors.Is(err, ErrInvalid) || errors.Is(err, dlgrpc.ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// batchOverhead is what a record batch's message needs beside the
// tensor's values: the IPC header (a flatbuffer of 168 bytes for one
// fixed_shape_tensor column, whatever the row count), the FlightData tags
// and lengths (under 20 bytes) and the body's padding to 64 bytes, with
// room to spare. The schema message, which carries no values, is
// checked as it is written (framePayloadWriter).
const batchOverhead = 512

// send writes the tensor's bytes as a stream: the schema (ws, made by
// l.wire, with desc, if any), then batches of as many rows as fit in
// maxMessage bytes. The batches share data. keep, when set, holds data: the codec then gives
// the values to gRPC without a copy (gRPC's writer copies them into its
// socket buffer), and keep stays referenced until gRPC is done with them;
// without keep the codec copies them into gRPC's send buffer first.
//
// mapped, when set, is the file mapping data lies in (a tensorfile
// tensor): the codec then copies every part, under a fault guard.
func send(sendMsg func(any) error, desc *flight.FlightDescriptor, ws *wireSchema, l layout, data []byte, keep *dlgrpc.Hold, mapped bool, maxMessage int) error {
	if maxMessage <= batchOverhead {
		return fmt.Errorf("%w: a message of %d bytes cannot hold a record batch's metadata (%d bytes allowed for it)", errLimit, maxMessage, batchOverhead)
	}
	rb := l.rowBytes()
	per := int64(maxMessage-batchOverhead) / rb
	if per < 1 {
		return fmt.Errorf("%w: a row of %d bytes and a batch's metadata (%d bytes allowed for it) do not fit in a message of %d", errLimit, rb, batchOverhead, maxMessage)
	}
	pw := &framePayloadWriter{send: sendMsg, desc: desc, keep: keep, max: maxMessage}
	if mapped {
		pw.guard = data
	}
	// The stream is what an ipc.Writer would write (the schema message,
	// then one message per batch; Flight has no end-of-stream marker),
	// with the schema's message made once per tensor rather than once per
	// call: its flatbuffer was a tenth of a DoGet's CPU at 1 MiB.
	if err := pw.writeFrame(ws.meta, nil); err != nil {
		return err
	}
	for from := int64(0); from < l.rows || from == 0; from += per {
		n := min(per, l.rows-from)
		rec := l.batch(ws.schema, data, from, n)
		p, err := ipc.GetRecordBatchPayload(rec)
		rec.Release()
		if err == nil {
			err = pw.WritePayload(p)
			p.Release()
		}
		if err != nil {
			return err
		}
		if l.rows == 0 {
			break
		}
	}
	return nil
}

// wireSchema is a tensor's schema and its IPC message, made once: the
// schema names the column, so it is made for one name.
type wireSchema struct {
	column string
	schema *arrow.Schema
	meta   []byte
}

// wire makes the schema of l's tensor in a column named column, and its
// IPC message.
func (l layout) wire(column string) *wireSchema {
	schema := l.schema(column)
	p := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
	meta := p.Meta()
	ws := &wireSchema{column: column, schema: schema, meta: bytes.Clone(meta.Bytes())}
	meta.Release()
	p.Release()
	return ws
}

// framePayloadWriter turns IPC payloads into outFrames whose body parts are
// the payload's buffers themselves.
type framePayloadWriter struct {
	send  func(any) error
	desc  *flight.FlightDescriptor
	keep  *dlgrpc.Hold
	guard []byte // the file mapping the values lie in, if any
	max   int    // the message limit
	n     int    // payloads written
	parts partsWriter
}

// partsWriter collects the slices SerializeBody writes, without copying.
type partsWriter [][]byte

func (w *partsWriter) Write(p []byte) (int, error) {
	*w = append(*w, p)
	return len(p), nil
}

func (w *framePayloadWriter) Start() error { return nil }
func (w *framePayloadWriter) Close() error { return nil }

func (w *framePayloadWriter) WritePayload(p ipc.Payload) error {
	meta := p.Meta()
	defer meta.Release()
	w.parts = w.parts[:0]
	if err := p.SerializeBody(&w.parts); err != nil {
		return err
	}
	return w.writeFrame(meta.Bytes(), w.parts)
}

// writeFrame sends one IPC message: its metadata (header) and body parts.
func (w *framePayloadWriter) writeFrame(header []byte, parts [][]byte) error {
	size := len(header) + 3*(2+binary.MaxVarintLen64)
	for _, b := range parts {
		size += len(b)
	}
	if w.desc != nil {
		size += proto.Size(w.desc)
	}
	if size > w.max {
		kind := "record batch"
		if w.n == 0 {
			kind = "schema"
		}
		return fmt.Errorf("%w: the %s message's metadata, %d bytes with its values, does not fit in a message of %d", errLimit, kind, size, w.max)
	}
	w.n++
	if sendHook != nil {
		sendHook(parts)
	}
	f := &outFrame{desc: w.desc, header: header, body: parts, keep: w.keep, guard: w.guard}
	w.desc = nil
	if err := w.send(f); err != nil {
		if f.err != nil {
			return f.err // gRPC keeps only the text of Marshal's error
		}
		return err
	}
	if w.keep != nil {
		w.keep.Sent()
	}
	return nil
}

// recvHook, when set (tests), sees the body of every frame received.
var recvHook func(body []byte)

// sendHook, when set (tests), sees the body parts of every frame sent.
var sendHook func(parts [][]byte)

// checkIPC verifies an IPC message's metadata before arrow-go reads it:
// arrow-go trusts flatbuffer vector lengths (they size its allocations)
// and child offsets (they drive its recursion), so a peer's message of
// a schema whose field list claims 2^31 children ended the process
// "out of memory". A message must pass the flatbuffers verifier as Arrow
// C++ runs it (arrowfb.Verify, arrowfb.Check), be a schema or a record
// batch, and not be compressed: arrow-go sizes a decompressed buffer by
// a length in the body, and a tensor stream has no use for it.
func checkIPC(meta []byte) error {
	if err := arrowfb.Verify(meta, arrowfb.Message); err != nil {
		return &dlpack.FieldError{Field: "data_header", Value: len(meta), Err: ErrInvalid, Why: err.Error()}
	}
	compressed, err := arrowfb.Check(meta)
	if err != nil {
		return &dlpack.FieldError{Field: "data_header", Value: len(meta), Err: ErrInvalid, Why: err.Error()}
	}
	b := arrowfb.Buf(meta)
	root, _ := b.Deref(0)
	msg, _ := b.Table(root)
	switch kind := msg.U8(6); {
	case kind != 1 && kind != 3:
		return &dlpack.FieldError{Field: "data_header.header_type", Value: kind, Err: ErrInvalid,
			Why: "a tensor stream has a schema and record batches only (no dictionaries, tensors or sparse tensors)"}
	case compressed:
		return &dlpack.FieldError{Field: "data_header.compression", Value: "set", Err: ErrInvalid,
			Why: "a tensor stream's batches are not compressed (the values are shared as they arrive)"}
	}
	return nil
}

// deserializeSchema is flight.DeserializeSchema of a peer's bytes (a
// FlightInfo's or SchemaResult's schema: an encapsulated IPC message),
// its metadata verified first (checkIPC).
func deserializeSchema(b []byte) (*arrow.Schema, error) {
	meta := b
	if len(meta) >= 4 && binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
		meta = meta[4:]
	}
	if len(meta) < 4 {
		return nil, fmt.Errorf("%w: a schema message of %d bytes", ErrInvalid, len(b))
	}
	n := int64(int32(binary.LittleEndian.Uint32(meta)))
	if n <= 0 || n > int64(len(meta)-4) {
		return nil, fmt.Errorf("%w: a schema message declares %d bytes of metadata in %d", ErrInvalid, n, len(meta)-4)
	}
	if err := checkIPC(meta[4 : 4+n]); err != nil {
		return nil, err
	}
	return flight.DeserializeSchema(b, memory.DefaultAllocator)
}
