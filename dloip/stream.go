package dloip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Triton's parameters of streaming inference.
const (
	// ParamFinal is the response parameter (bool) that marks a request's
	// last response on a stream.
	ParamFinal = "triton_final_response"
	// ParamEmptyFinal is the request parameter (bool) that asks for an
	// empty final response when a StreamModel ends a request without a
	// response of its own.
	ParamEmptyFinal = "triton_enable_empty_final_response"
)

const methodStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer"

// errDecoupled refuses a StreamModel outside a stream, in Triton's
// words.
func errDecoupled(model string) error {
	return status.Errorf(codes.Unimplemented, "dloip: model %q: ModelInfer doesn't support models with decoupled transaction policy (the model answers with any number of responses: call ModelStreamInfer)", model)
}

func streamHandler(srv any, ss grpc.ServerStream) error { return srv.(service).s.serveStream(ss) }

// streamCall is a ModelStreamInfer call being served.
type streamCall struct {
	s  *Server
	ss grpc.ServerStream
	// ctx ends with the call: the models' context
	ctx    context.Context
	cancel context.CancelFunc
	// hold: every response's Hold is Within it, for the stall watch
	hold *dlgrpc.Hold
	// mu: one send at a time; broken: the send that failed, after which
	// the stream is over
	mu     sync.Mutex
	broken error
}

// serveStream serves a ModelStreamInfer call: it reads requests as they
// come and runs each on a goroutine of its own, at most
// MaxStreamRequests at once, the first in the call's own place among
// MaxConcurrentCalls and each other one in a place it takes. A message
// that breaks the protocol's wire format or a limit ends the stream with
// its status; a request that fails is answered with its error and the
// stream goes on. Once the client has closed its side, the call ends
// when the last request has.
func (s *Server) serveStream(ss grpc.ServerStream) error {
	s.work.streamOpen(1)
	defer s.work.streamOpen(-1)
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	c := &streamCall{s: s, ss: ss, ctx: ctx, cancel: cancel, hold: s.srv.NewHold(nil)}
	defer c.hold.Drop()
	stop := s.srv.WatchSends(ss.Context(), c.hold)
	defer stop()

	var wg sync.WaitGroup
	// ended carries the end of each request: whether it ran in the
	// call's own place
	ended := make(chan bool, s.opts.MaxStreamRequests)
	running, ownBusy := 0, false
	free := func(own bool) {
		running--
		if own {
			ownBusy = false
		}
	}
	// place waits for room for one more request
	place := func() (own bool, leave func(), ok bool) {
		for {
			for drained := false; !drained; {
				select {
				case o := <-ended:
					free(o)
				default:
					drained = true
				}
			}
			if !ownBusy {
				ownBusy = true
				return true, func() {}, true
			}
			if running < s.opts.MaxStreamRequests {
				if leave, ok := s.srv.TakePlace(); ok {
					return false, leave, true
				}
			}
			select {
			case o := <-ended:
				free(o)
			case <-ctx.Done():
				return false, nil, false
			}
		}
	}
	// The requests are read on a goroutine of their own, each only when
	// the loop asks for it (a stream with no room is read no further),
	// so that the loop can stop waiting for the next one when Shutdown
	// ends the stream: the handler returns, and gRPC sends what the
	// stream queued, then its status. A request read once the handler
	// has returned is freed there.
	asks, got, handlerDone := make(chan *inInfer), make(chan error), make(chan struct{})
	defer close(handlerDone)
	defer close(asks)
	go func() {
		for in := range asks {
			rerr := ss.RecvMsg(in)
			select {
			case got <- rerr:
			case <-handlerDone:
				in.freeRest()
				return
			}
			if rerr != nil {
				return
			}
		}
	}()
	// Requests to a Model answer in the order they came, as Triton's
	// do: each waits for the turn of the one before.
	turn := make(chan struct{})
	close(turn)
	var err error
	for {
		own, leave, ok := place()
		if !ok {
			err = status.FromContextError(ctx.Err()).Err()
			break
		}
		in := newInInfer(new(pb.ModelInferRequest), fieldRawInput, s.opts.Allocator, s.opts.MaxTensorBytes)
		asks <- in
		var rerr error
		select {
		case rerr = <-got:
		case <-s.ending:
			// no request runs, here or on any other call
			leave()
			err = status.Error(codes.Unavailable, "dloip: the server is shutting down")
		}
		if err != nil {
			break
		}
		if rerr != nil {
			leave()
			if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
			break
		}
		if in.err != nil {
			leave()
			err = statusOf(fmt.Errorf("dloip: stream: request: %w", in.err))
			break
		}
		running++
		r := in.msg.(*pb.ModelInferRequest)
		var prev, mine chan struct{}
		if !s.isStream(r.GetModelName()) {
			prev, mine = turn, make(chan struct{})
			turn = mine
		}
		s.work.requests(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { ended <- own }()
			defer leave()
			defer s.work.requests(-1)
			c.serve(in, prev, mine)
		}()
	}
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err == nil {
		c.mu.Lock()
		err = c.broken
		c.mu.Unlock()
	}
	return err
}

// isStream reports whether the model name is a StreamModel.
func (s *Server) isStream(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.models[name]
	return m != nil && m.stream != nil
}

// serve runs one request and sends its responses: those its model sends
// and the last, or its error. A request to a Model answers in its turn:
// once prev is closed (nil: at once); it closes mine when it is done.
func (c *streamCall) serve(in *inInfer, prev <-chan struct{}, mine chan struct{}) {
	if mine != nil {
		defer close(mine)
	}
	defer in.freeRest()
	s := c.s
	r := in.msg.(*pb.ModelInferRequest)
	turn := func() bool {
		if prev == nil {
			return true
		}
		select {
		case <-prev:
			return true
		case <-c.ctx.Done():
			return false
		}
	}
	fail := func(err error) {
		if turn() {
			c.sendError(r, err)
		}
	}
	if s.isClosed() {
		fail(status.Error(codes.Unavailable, "dloip: the server is shutting down and takes no new requests"))
		return
	}
	m, err := s.model(c.ctx, dlgrpc.OpInfer, r.GetModelName(), r.GetModelVersion())
	if err != nil {
		fail(err)
		return
	}
	wrap := func(err error) error { return fmt.Errorf("dloip: model %q: %w", m.meta.Name, err) }
	req, err := s.request(c.ctx, m, r, in)
	if err != nil {
		fail(wrap(err))
		return
	}
	// The inputs are released once the outputs are taken: an output may
	// be an input, or share its memory.
	defer req.close()
	if m.stream == nil {
		outs, err := s.runModel(c.ctx, m, req)
		defer s.releaseOutputs(m.meta.Name, outs)
		if err != nil {
			fail(wrap(err))
			return
		}
		if !turn() {
			return
		}
		if err := c.respond(m, r, req.Outputs, outs, true); err != nil {
			c.sendError(r, wrap(err))
		}
		return
	}
	q := &requestSends{c: c, m: m, r: r, asked: req.Outputs}
	outs, err := s.runStream(c.ctx, m, req, q.send)
	defer s.releaseOutputs(m.meta.Name, outs)
	if failed := q.finish(); failed != nil {
		c.sendError(r, wrap(failed))
		return
	}
	if err != nil {
		c.sendError(r, wrap(err))
		return
	}
	if len(outs) == 0 {
		if r.GetParameters()[ParamEmptyFinal].GetBoolParam() {
			c.sendEmpty(m, r)
		}
		return
	}
	if err := c.respond(m, r, req.Outputs, outs, true); err != nil {
		c.sendError(r, wrap(err))
	}
}

// runStream runs m's InferStream on req, a panic in it an error
// wrapping dlgrpc.ErrPanic (reported to the Logger).
func (s *Server) runStream(ctx context.Context, m *served, req *Request, send func([]Output) error) (outs []Output, err error) {
	err = s.srv.Call(fmt.Sprintf("model %q", m.meta.Name), func() (err error) {
		outs, err = m.stream.InferStream(ctx, req, send)
		return err
	})
	return outs, err
}

// requestSends is the send of one request's StreamModel: its responses
// one at a time, until one fails or the model returns.
type requestSends struct {
	c     *streamCall
	m     *served
	r     *pb.ModelInferRequest
	asked []string
	mu    sync.Mutex
	err   error // the send that failed
	done  bool  // InferStream returned
}

func (q *requestSends) send(outs []Output) error {
	defer q.c.s.releaseOutputs(q.m.meta.Name, outs)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return fmt.Errorf("dloip: model %q: send: %w: InferStream has returned", q.m.meta.Name, dlpack.ErrClosed)
	}
	if q.err != nil {
		return q.err
	}
	if err := q.c.respond(q.m, q.r, q.asked, outs, false); err != nil {
		q.err = err
		return err
	}
	return nil
}

// finish marks the model returned; it returns the send that failed.
func (q *requestSends) finish() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.done = true
	return q.err
}

// respond sends a response of the model's outputs, final or not. Its
// error is the request's (an output that breaks the metadata, a mapped
// file cut short, a response beyond MaxMessageBytes) or, once the
// stream is over, the stream's.
func (c *streamCall) respond(m *served, r *pb.ModelInferRequest, asked []string, outs []Output, final bool) error {
	msg, raws, mapped, held, err := c.s.outputs(c.ctx, m, r, asked, outs)
	if err != nil {
		return err
	}
	msg.Parameters = finalParam(final)
	h := c.s.srv.NewHold(func() { closeTaken(held) })
	h.Within(c.hold)
	defer h.Drop()
	return c.send(streamWriter("", msg, raws, mapped, h))
}

// sendError answers a request with err (its status's message), as its
// final response; nothing once the stream is over.
func (c *streamCall) sendError(r *pb.ModelInferRequest, err error) {
	st, _ := status.FromError(statusOf(err))
	text := st.Message()
	if text == "" {
		text = fmt.Sprintf("dloip: model %q: the request failed (%v)", r.GetModelName(), st.Code())
	}
	msg := &pb.ModelInferResponse{ModelName: r.GetModelName(), ModelVersion: r.GetModelVersion(), Id: r.GetId(), Parameters: finalParam(true)}
	_ = c.send(streamWriter(text, msg, nil, nil, nil))
}

// sendEmpty sends a request's empty final response.
func (c *streamCall) sendEmpty(m *served, r *pb.ModelInferRequest) {
	msg := &pb.ModelInferResponse{ModelName: m.meta.Name, ModelVersion: r.GetModelVersion(), Id: r.GetId(), Parameters: finalParam(true)}
	_ = c.send(streamWriter("", msg, nil, nil, nil))
}

func finalParam(final bool) map[string]*pb.InferParameter {
	return map[string]*pb.InferParameter{ParamFinal: {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: final}}}
}

// send marshals the message w writes and hands it to gRPC, after the
// messages sent before it: SendMsg blocks while the client does not
// read, and the stall watch counts that time. An error in marshalling,
// or a message beyond MaxMessageBytes, fails this message alone; an
// error of gRPC's ends the stream.
func (c *streamCall) send(w *dlgrpc.Writer) error {
	b, err := w.Marshal()
	if err != nil {
		return err
	}
	if n := b.Len(); n > c.s.opts.MaxMessageBytes {
		b.Free()
		return &dlpack.FieldError{Field: "response", Value: fmt.Sprintf("%d bytes", n), Err: ErrLimit,
			Why: fmt.Sprintf("a message is %d bytes at most (MaxMessageBytes)", c.s.opts.MaxMessageBytes)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil && c.ctx.Err() != nil {
		c.broken = status.FromContextError(c.ctx.Err()).Err()
	}
	if c.broken != nil {
		b.Free()
		return c.broken
	}
	done := c.hold.Sending()
	err = c.ss.SendMsg(marshalled(b))
	done()
	if err != nil {
		c.broken = err
		c.cancel()
	}
	return err
}
