package dloip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// ErrResponse is the error of a request on a stream that the server
// failed, saying so in that request's response (the protocol's
// error_message) and serving the stream on. Such an error is a
// *ResponseError.
var ErrResponse = errors.New("dloip: the server answered a request with an error")

// ResponseError is a server's answer that a request on a stream failed:
// the request's model, version and id as the answer gives them (Triton
// gives the request's id back so that a client knows which one
// failed), and the server's message. It wraps ErrResponse.
type ResponseError struct {
	Model, Version, ID string
	Message            string
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("dloip: request %q: %s", e.ID, e.Message)
}

func (e *ResponseError) Unwrap() error { return ErrResponse }

var streamDesc = grpc.StreamDesc{StreamName: "ModelStreamInfer", ServerStreams: true, ClientStreams: true}

// Stream is a ModelStreamInfer call: requests sent on it (Send) run on
// the server as they arrive, each answered by one response or, from a
// decoupled model (a StreamModel, an LLM streaming tokens), by any
// number of them, which come back in the order the server sends them
// (Recv); a response's ID tells which request it answers. One goroutine
// may Send while another Receives; Send and Recv are each safe for
// concurrent use, one call at a time. Close it when done.
type Stream struct {
	c      *Client
	cs     grpc.ClientStream
	ctx    context.Context
	cancel context.CancelFunc
	sendMu sync.Mutex
	// sentLast: CloseSend was called
	sentLast bool
	recvMu   sync.Mutex
	// err is the error that ended the stream, once one has
	err    error
	closed atomic.Bool
}

// InferStream opens a stream of inference requests on the server
// (Triton's ModelStreamInfer), for as long as ctx lasts or until Close.
func (c *Client) InferStream(ctx context.Context) (*Stream, error) {
	if err := c.errIfClosed("infer stream"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(c.ctx(ctx))
	cs, err := c.conn.NewStream(ctx, &streamDesc, methodStreamInfer)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Stream{c: c, cs: cs, ctx: ctx, cancel: cancel}, nil
}

// Send sends a request, its inputs as Infer sends them: from the
// producers' own memory, each held until gRPC has written it. It
// returns once the request is handed to gRPC, which blocks while the
// server does not read (its requests running, MaxStreamRequests of
// them, say). An output asked for in a shared-memory region is refused
// (ErrInvalid): a stream's responses do not say which region each one
// was written to. A request that cannot be sent (an input that breaks
// the protocol, a file mapping cut short, a message beyond
// MaxMessageBytes) fails alone, and the stream goes on. io.EOF says
// that the stream has ended: Recv gives its status.
func (s *Stream) Send(req *InferRequest) error {
	for _, o := range req.Outputs {
		if o.Region != "" {
			return &dlpack.FieldError{Field: fmt.Sprintf("output %q: region", o.Name), Value: o.Region, Err: ErrInvalid,
				Why: "an output in shared memory is asked for with Infer, not on a stream"}
		}
	}
	msg, raws, mapped, held, err := s.c.message(req)
	if err != nil {
		return err
	}
	h := s.c.conn.NewHold(func() { closeAll(held) })
	defer h.Drop()
	b, err := newOutInfer(msg, fieldRawInput, raws, mapped, h).w.Marshal()
	if err != nil {
		return fmt.Errorf("dloip: stream: infer %q: input: %w", req.Model, err)
	}
	if n := b.Len(); n > s.c.opts.MaxMessageBytes {
		b.Free()
		return &dlpack.FieldError{Field: fmt.Sprintf("infer %q: request", req.Model), Value: fmt.Sprintf("%d bytes", n), Err: ErrLimit,
			Why: fmt.Sprintf("a message is %d bytes at most (MaxMessageBytes)", s.c.opts.MaxMessageBytes)}
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sentLast {
		b.Free()
		return fmt.Errorf("dloip: stream: infer %q: %w: CloseSend was called", req.Model, dlpack.ErrClosed)
	}
	return s.cs.SendMsg(marshalled(b))
}

// CloseSend tells the server that no more requests come; responses
// still do, until the server ends the stream, once it has answered
// every request (Recv then returns io.EOF).
func (s *Stream) CloseSend() error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sentLast {
		return nil
	}
	s.sentLast = true
	return s.cs.CloseSend()
}

// Recv receives the next response. Each is decoded as Infer decodes
// one: its outputs share the aligned buffers they were copied into,
// every size it declares checked against what it carries and against
// ClientOptions.MaxTensorBytes before anything is allocated; close it
// when done. A request that failed on the server comes as an error, a
// *ResponseError (wrapping ErrResponse) naming the request, and the
// stream goes on. The end of the stream is io.EOF once the server has
// answered every request after CloseSend, or the call's status. A
// response that breaks the protocol ends the stream: Recv returns an
// error wrapping ErrInvalid, ErrDatatype, ErrShape, ErrLimit or
// dlgrpc.ErrMalformed, and every later Recv that error too. Once the
// stream's context is cancelled, or Close called, Recv returns nothing
// more, even what gRPC had received; nor once the Client is closed.
func (s *Stream) Recv() (*InferResponse, error) {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if err := s.ended(); err != nil {
		return nil, err
	}
	in := newInStream(s.c.opts.Allocator, s.c.opts.MaxTensorBytes)
	if err := s.cs.RecvMsg(in); err != nil {
		s.err = err
		return nil, err
	}
	// gRPC hands over what it received before a cancellation: dropped
	if err := s.ended(); err != nil {
		in.freeRest()
		return nil, err
	}
	resp, err := s.c.streamResponse(in)
	var re *ResponseError
	if err != nil && !errors.As(err, &re) {
		s.err = err
		s.cancel()
	}
	return resp, err
}

// ended is the error of a stream closed, cancelled or ended.
func (s *Stream) ended() error {
	if s.closed.Load() {
		return fmt.Errorf("dloip: stream: %w", dlpack.ErrClosed)
	}
	if err := s.c.errIfClosed("stream"); err != nil {
		return err
	}
	if s.err == nil && s.ctx.Err() != nil {
		s.err = status.FromContextError(s.ctx.Err()).Err()
	}
	return s.err
}

// streamResponse checks and converts a received ModelStreamInferResponse.
func (c *Client) streamResponse(in *inInfer) (*InferResponse, error) {
	if in.err != nil {
		return nil, fmt.Errorf("dloip: stream: response: %w", in.err)
	}
	m := in.msg.(*pb.ModelStreamInferResponse)
	r := m.GetInferResponse()
	if r == nil {
		r = &pb.ModelInferResponse{}
	}
	final := false
	if p, ok := r.GetParameters()[ParamFinal]; ok {
		b, ok := p.GetParameterChoice().(*pb.InferParameter_BoolParam)
		if !ok {
			in.freeRest()
			return nil, &dlpack.FieldError{Field: "response: parameters: " + ParamFinal, Value: paramsOf(map[string]*pb.InferParameter{ParamFinal: p})[ParamFinal],
				Err: ErrInvalid, Why: "a bool, or nothing"}
		}
		final = b.BoolParam
	}
	if e := m.GetErrorMessage(); e != "" {
		in.freeRest()
		return nil, &ResponseError{Model: r.GetModelName(), Version: r.GetModelVersion(), ID: r.GetId(), Message: e}
	}
	resp, err := c.responseOf(&InferRequest{Model: r.GetModelName()}, r, in)
	if err != nil {
		return nil, fmt.Errorf("dloip: stream: %w", err)
	}
	resp.Final = final
	return resp, nil
}

// Close ends the call: requests still running are cancelled on the
// server, and responses not yet received are dropped, nothing of them
// held, and Recv fails with an error wrapping dlpack.ErrClosed.
// Responses received stay valid until closed. Calling it again does
// nothing.
func (s *Stream) Close() error {
	s.closed.Store(true)
	s.cancel()
	return nil
}

// Responses sends req alone on a stream of its own and yields its
// responses as they come, a decoupled model's tokens, say, each a
// response to close when done; it ends after the final one (the
// request parameter ParamEmptyFinal is set, so that the server says
// which one that is even when the model ends without a response of its
// own; that empty final response is not yielded), or when the server
// ends the stream. An error ends it too, yielded once: a *ResponseError
// (wrapping ErrResponse) when the server answered the request with an
// error, anything else when the stream broke. Stopping early, or
// cancelling ctx, cancels the request on the server; nothing is held
// after the loop.
func (c *Client) Responses(ctx context.Context, req *InferRequest) iter.Seq2[*InferResponse, error] {
	return func(yield func(*InferResponse, error) bool) {
		s, err := c.InferStream(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		defer s.Close()
		r := *req
		r.Parameters = maps.Clone(req.Parameters)
		if r.Parameters == nil {
			r.Parameters = Parameters{}
		}
		r.Parameters[ParamEmptyFinal] = true
		// io.EOF: the stream ended, and Recv gives why
		if err := s.Send(&r); err != nil && !errors.Is(err, io.EOF) {
			yield(nil, err)
			return
		}
		if err := s.CloseSend(); err != nil {
			yield(nil, err)
			return
		}
		for {
			resp, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if resp.Final && len(resp.Outputs) == 0 {
				resp.Close()
				return
			}
			final := resp.Final
			if !yield(resp, nil) || final {
				return
			}
		}
	}
}
