package dlflight

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// putMagic starts the command of a range put's descriptor (never a
// name: 0xff is not UTF-8).
const putMagic = "\xffdlflight-put\x00"

// putJSON describes one range of a parallel Put: rows [From, To) of the
// tensor Name of DType and Shape, one of the ranges of upload Upload.
type putJSON struct {
	Name   string  `json:"name"`
	Upload string  `json:"upload"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	From   int64   `json:"from"`
	To     int64   `json:"to"`
}

// putRange is a parsed range put.
type putRange struct {
	putJSON
	l layout // the whole tensor's
}

// parsePutRange reads a range put's descriptor (ok false: not one).
func parsePutRange(d *flight.FlightDescriptor) (putRange, bool, error) {
	if d == nil || d.Type != flight.DescriptorCMD || !bytes.HasPrefix(d.Cmd, []byte(putMagic)) {
		return putRange{}, false, nil
	}
	var p putRange
	bad := func(err error) (putRange, bool, error) {
		return putRange{}, true, status.Errorf(codes.InvalidArgument, "dlflight: range put %q: %v", d.Cmd[len(putMagic):], err)
	}
	if err := json.Unmarshal(d.Cmd[len(putMagic):], &p.putJSON); err != nil {
		return bad(err)
	}
	if err := checkName(p.Name); err != nil {
		return bad(err)
	}
	if p.Upload == "" || len(p.Upload) > 64 {
		return bad(&dlpack.FieldError{Field: "upload", Value: p.Upload, Err: ErrInvalid, Why: "1 to 64 bytes"})
	}
	dt, err := dlpack.ParseDataType(p.DType)
	if err != nil {
		return bad(err)
	}
	if p.l, err = layoutOf(dt, p.Shape); err != nil {
		return bad(err)
	}
	if _, err := p.l.rowsOf(p.From, p.To); err != nil || p.From == p.To {
		return bad(&dlpack.FieldError{Field: "rows", Value: [2]int64{p.From, p.To}, Err: ErrShape,
			Why: fmt.Sprintf("not a non-empty range of the %d rows of shape %v", p.l.rows, p.l.shape)})
	}
	return p, true, nil
}

// upload is a tensor a parallel Put is sending in ranges: one buffer the
// ranges are received into, stored under the name once every row has
// arrived. An upload that fails, or that no range of has touched for the
// server's upload timeout, is dropped and its buffer released once no
// range is still receiving into it.
type upload struct {
	key     string
	l       layout
	buf     *memory.Buffer
	taken   [][2]int64 // ranges received or being received
	rows    int64      // rows received
	active  int        // ranges being received
	failed  bool
	stalled *time.Timer
}

// putRange receives one range of a parallel Put into its upload.
func (s *Server) putRange(stream flight.FlightService_DoPutServer, pre *inFrame, p putRange) error {
	refuse := func(err error) error {
		if pre.body != nil {
			pre.body.Release()
		}
		return err
	}
	if err := s.allowed(stream.Context(), dlgrpc.OpWrite, p.Name); err != nil {
		return refuse(err)
	}
	if err := s.roomFor(p.Name); err != nil {
		return refuse(err)
	}
	u, err := s.joinUpload(p)
	if err != nil {
		return refuse(err)
	}
	rb := p.l.rowBytes()
	lo, hi := p.From*rb, p.To*rb
	all := u.buf.Bytes()
	pl := &placer{dest: all[lo : hi : hi+Align], alloc: s.opts.Allocator}
	pre.alloc = pl // the first message has no values; later ones go in place
	if pre.body != nil {
		pre.body.Release()
		pre.body = nil
		err = status.Errorf(codes.InvalidArgument, "dlflight: range put %q: the first message carries a body", p.Name)
	} else {
		r := newFrameReader(replay(pre, stream.RecvMsg), pl, s.opts.MaxTensorBytes)
		err = receiveInto(r, pl, p.l, p.To-p.From)
	}
	done, err := s.leaveUpload(u, p, err)
	if err != nil {
		return statusOf(err)
	}
	if done {
		buf, n := u.buf, p.l.nbytes
		e := &entry{l: p.l, release: func() { buf.Release(); s.stored.give(n) }}
		e.refs.Store(1)
		if p.l.nbytes > 0 {
			e.data = all[:p.l.nbytes:p.l.nbytes]
		}
		if err := s.store(p.Name, e, true); err != nil {
			return statusOf(err)
		}
	}
	return stream.Send(&flight.PutResult{})
}

// uploadTimeout is how long an incomplete upload may go without a range
// arriving before it is dropped: StallTimeout, or its default.
func (s *Server) uploadTimeout() time.Duration {
	if s.opts.StallTimeout > 0 {
		return s.opts.StallTimeout
	}
	return dlgrpc.DefaultStallTimeout
}

// joinUpload finds or makes p's upload and takes p's rows in it.
func (s *Server) joinUpload(p putRange) (*upload, error) {
	key := p.Name + "\x00" + p.Upload
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Error(codes.Unavailable, "dlflight: the server is shut down")
	}
	u := s.uploads[key]
	if u == nil && p.l.nbytes > s.opts.MaxTensorBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "dlflight: range put %q: %v: a tensor of %d bytes, and one put takes %d at most (MaxTensorBytes)",
			p.Name, ErrLimit, p.l.nbytes, s.opts.MaxTensorBytes)
	}
	if u == nil {
		// The buffer is allocated at the first range, before the rest
		// arrive: what peers' puts hold together is bounded
		// (MaxStoredBytes), so that a few small requests cannot claim
		// the memory of large tensors.
		if !s.stored.take(p.l.nbytes) {
			return nil, status.Errorf(codes.ResourceExhausted, "dlflight: range put %q: %v: %d bytes, and what peers put holds %d of the %d allowed (MaxStoredBytes)",
				p.Name, ErrLimit, p.l.nbytes, s.stored.load(), s.opts.MaxStoredBytes)
		}
		buf := memory.NewResizableBuffer(s.opts.Allocator)
		buf.Resize(int(p.l.nbytes) + Align) // the last range's slack (placer)
		u = &upload{key: key, l: p.l, buf: buf}
		if s.uploads == nil {
			s.uploads = map[string]*upload{}
		}
		s.uploads[key] = u
	}
	if u.l.dtype != p.l.dtype || !slices.Equal(u.l.shape, p.l.shape) {
		return nil, status.Errorf(codes.InvalidArgument, "dlflight: range put %q: %v %v, and the upload's other ranges say %v %v", p.Name, p.l.dtype, p.l.shape, u.l.dtype, u.l.shape)
	}
	for _, t := range u.taken {
		if p.From < t[1] && t[0] < p.To {
			return nil, status.Errorf(codes.InvalidArgument, "dlflight: range put %q: rows %d to %d overlap rows %d to %d", p.Name, p.From, p.To, t[0], t[1])
		}
	}
	u.taken = append(u.taken, [2]int64{p.From, p.To})
	u.active++
	if u.stalled != nil {
		u.stalled.Stop()
		u.stalled = nil
	}
	return u, nil
}

// leaveUpload ends a range of u with the outcome err: it reports whether
// the upload is complete (the caller stores it), and drops u when it
// failed. The buffer is released by the last range to leave a dropped
// upload.
func (s *Server) leaveUpload(u *upload, p putRange, err error) (done bool, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u.active--
	if err == nil && u.failed {
		err = status.Errorf(codes.Aborted, "dlflight: range put %q: another range of the upload failed", p.Name)
	}
	if err != nil {
		s.dropUpload(u)
		return false, err
	}
	u.rows += p.To - p.From
	if u.rows == u.l.rows {
		// the stored entry keeps the upload's bytes counted
		delete(s.uploads, u.key)
		return true, nil
	}
	if u.active == 0 {
		u.stalled = time.AfterFunc(s.uploadTimeout(), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if u.active == 0 && !u.failed && s.uploads[u.key] == u {
				s.dropUpload(u)
			}
		})
	}
	return false, nil
}

// dropUpload (s.mu held) fails u and releases its buffer if no range is
// receiving into it.
func (s *Server) dropUpload(u *upload) {
	if s.uploads[u.key] == u {
		delete(s.uploads, u.key)
		s.stored.give(u.l.nbytes)
	}
	u.failed = true
	if u.active == 0 && u.buf != nil {
		u.buf.Release()
		u.buf = nil
	}
}

// dropUploads drops every upload (Shutdown).
func (s *Server) dropUploads() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.uploads {
		if u.stalled != nil {
			u.stalled.Stop()
		}
		s.dropUpload(u)
	}
}

// putParallel sends e's tensor as ranges of about PutRangeBytes on up to
// Streams DoPuts at once; the server stores it once every range has
// arrived.
func (c *Client) putParallel(ctx context.Context, name string, e *entry) error {
	var id [16]byte
	rand.Read(id[:])
	upload := hex.EncodeToString(id[:])
	ranges := split(e.l, c.opts.PutRangeBytes)
	g, ctx := errgroup.WithContext(c.ctx(ctx))
	g.SetLimit(c.opts.Streams)
	rb := e.l.rowBytes()
	for i, r := range ranges {
		cmd, _ := json.Marshal(putJSON{Name: name, Upload: upload, DType: e.l.dtype.String(), Shape: e.l.shape, From: r[0], To: r[1]})
		desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: append([]byte(putMagic), cmd...)}
		l, _ := e.l.rowsOf(r[0], r[1])
		g.Go(func() error {
			if err := c.putStream(ctx, desc, name, l, e.data[r[0]*rb:r[1]*rb], e); err != nil {
				return fmt.Errorf("range %d (rows %d to %d): %w", i, r[0], r[1], err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("dlflight: put %q: %w", name, err)
	}
	return nil
}

// putStream sends one tensor stream (l's rows, data of e) on a DoPut with
// desc and waits for the server's answer and for gRPC to let go of data.
func (c *Client) putStream(ctx context.Context, desc *flight.FlightDescriptor, column string, l layout, data []byte, e *entry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.fc.DoPut(ctx)
	if err != nil {
		return err
	}
	e.refs.Add(1)
	h := c.conn.NewHold(e.drop)
	defer h.Drop()
	if err := send(stream.SendMsg, desc, l.wire(column), l, data, h, e.mapped, c.opts.MaxMessageBytes); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				h.Wait(ctx)
				return nil
			}
			return err
		}
	}
}
