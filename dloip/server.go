package dloip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server serves Models over the Open Inference Protocol's gRPC service
// (inference.GRPCInferenceService) and its REST binding, to any client
// of the protocol: tritonclient, kserve's InferenceGRPCClient and
// InferenceRESTClient, a dloip Client or RESTClient, curl, ... Build it
// with NewServer, Register models, Serve a listener (and ServeREST
// another), Shutdown at the end.
type Server struct {
	opts Options
	srv  *dlgrpc.Server
	mu   sync.RWMutex
	// models: the registered models by name.
	models map[string]*served
	// regions: the registered shared-memory regions (shm.go).
	regions map[string]*region
	closed  bool
	// work: what runs, for Shutdown
	work work
	// ending is closed by Shutdown once no request runs: a stream
	// waiting for its next request then ends (stream.go)
	ending     chan struct{}
	endingOnce sync.Once
	// rest: the REST binding (rest.go).
	rest restState
	// unsent: the bytes of ModelInfer answers gRPC holds, not yet
	// written (their tensors' raw contents); at most
	// MaxConcurrentCalls × MaxMessageBytes (response)
	unsent atomic.Int64
}

// work counts the requests running (ModelInfer calls and requests on
// streams) and the streams open.
type work struct {
	mu               sync.Mutex
	running, streams int
}

func (w *work) requests(d int) {
	w.mu.Lock()
	w.running += d
	w.mu.Unlock()
}

func (w *work) streamOpen(d int) {
	w.mu.Lock()
	w.streams += d
	w.mu.Unlock()
}

// idleStreams reports whether streams are open and no request runs.
func (w *work) idleStreams() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running == 0 && w.streams > 0
}

// service is the Server as gRPC sees it: the protocol's methods.
type service struct {
	pb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// served is a registered model and its metadata, read once: a Model,
// or a StreamModel (m nil).
type served struct {
	m      Model
	stream StreamModel
	meta   ModelMetadata
}

// NewServer makes a Server; nothing listens until Serve.
func NewServer(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "dloip"
	}
	if opts.MaxRegions <= 0 {
		opts.MaxRegions = DefaultMaxRegions
	}
	if opts.MaxStreamRequests <= 0 {
		opts.MaxStreamRequests = DefaultMaxStreamRequests
	}
	s := &Server{models: map[string]*served{}, regions: map[string]*region{}, ending: make(chan struct{})}
	s.srv = dlgrpc.NewServer("dloip", opts.shared(), DefaultMaxMessageBytes, 0)
	// the shared options, their defaults filled in
	so := s.srv.Options()
	opts.Logger, opts.MaxMessageBytes, opts.MaxTensorBytes, opts.MaxConcurrentCalls = so.Logger, so.MaxMessageBytes, so.MaxTensorBytes, so.MaxConcurrentCalls
	opts.StallTimeout, opts.HandshakeTimeout, opts.Allocator = so.StallTimeout, so.HandshakeTimeout, so.Allocator
	s.opts = opts
	// The generated service, but ModelInfer and ModelStreamInfer decode
	// and encode through the shared wire layer's messages (raw contents
	// not copied by protobuf).
	desc := pb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ModelInfer" {
			desc.Methods[i].Handler = inferHandler
		}
	}
	desc.Streams = slices.Clone(desc.Streams)
	for i := range desc.Streams {
		if desc.Streams[i].StreamName == "ModelStreamInfer" {
			desc.Streams[i].Handler = streamHandler
		}
	}
	s.srv.RegisterService(&desc, service{s: s})
	return s
}

// Register serves m under the name of its metadata, replacing any model
// of that name. The metadata must name the model and give every input
// and output a name, a datatype the bridge carries ("" for any: the
// request decides) and a shape (ErrInvalid, ErrDatatype, ErrShape
// otherwise).
func (s *Server) Register(m Model) error {
	return s.register(&served{m: m, meta: m.Metadata()})
}

// RegisterStream serves m, a model that answers a request with any
// number of responses, as Register serves a Model: under the name of
// its metadata, replacing any model of that name, its metadata checked
// as Register checks it. Its requests come on ModelStreamInfer; a
// ModelInfer of it is refused, as Triton refuses one of a decoupled
// model (codes.Unimplemented).
func (s *Server) RegisterStream(m StreamModel) error {
	return s.register(&served{stream: m, meta: m.Metadata()})
}

func (s *Server) register(m *served) error {
	meta := m.meta
	if meta.Name == "" {
		return &dlpack.FieldError{Field: "metadata.name", Value: `""`, Err: ErrInvalid, Why: "a model needs a name"}
	}
	for _, list := range []struct {
		what string
		ts   []TensorMetadata
	}{{"input", meta.Inputs}, {"output", meta.Outputs}} {
		seen := map[string]bool{}
		for _, t := range list.ts {
			if t.Name == "" || seen[t.Name] {
				return &dlpack.FieldError{Field: fmt.Sprintf("metadata %q: %s name", meta.Name, list.what), Value: fmt.Sprintf("%q", t.Name), Err: ErrInvalid, Why: "empty or given twice"}
			}
			seen[t.Name] = true
			if t.Datatype != "" {
				if err := checkDatatype(t.Datatype); err != nil {
					return fmt.Errorf("dloip: register %q: %s %q: %w", meta.Name, list.what, t.Name, err)
				}
			}
			if t.Shape == nil {
				return &dlpack.FieldError{Field: fmt.Sprintf("metadata %q: %s %q: shape", meta.Name, list.what, t.Name), Value: "nil", Err: ErrShape,
					Why: "a shape has an entry per dimension, -1 for a variable size ([]int64{} for a scalar); a model that takes tensors of any rank leaves them out and is Dynamic"}
			}
			for i, d := range t.Shape {
				if d < -1 {
					return &dlpack.FieldError{Field: fmt.Sprintf("metadata %q: %s %q: shape[%d]", meta.Name, list.what, t.Name, i), Value: d, Err: ErrShape, Why: "-1 (variable) or a size"}
				}
			}
		}
	}
	s.mu.Lock()
	s.models[meta.Name] = m
	s.mu.Unlock()
	return nil
}

// Unregister stops serving the model name; it reports whether it was
// served. Calls already running finish.
func (s *Server) Unregister(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.models[name]
	delete(s.models, name)
	return ok
}

// Serve serves on lis until Shutdown; it returns nil then.
func (s *Server) Serve(lis net.Listener) error { return s.srv.Serve(lis) }

// Shutdown stops accepting calls (gRPC and REST), waits for the running
// ones, and stops; the shared-memory regions are unregistered (each
// unmapped once no tensor uses it). A stream stays open as long as its
// client keeps it: a request that comes on one once Shutdown has begun is
// answered codes.Unavailable, and once no request runs, on a stream or
// not, the streams still open are ended with codes.Unavailable, each
// after the responses it has sent (a stream that still cannot end after
// shutdownGrace has its connection closed).
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.rest.shutdown()
	stopped := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(stopped)
	}()
	for tick := time.NewTicker(10 * time.Millisecond); ; {
		select {
		case <-stopped:
		case <-tick.C:
			if !s.work.idleStreams() {
				continue
			}
			// The streams waiting for their next request end, so that
			// gRPC sends what they queued, then their status, and
			// GracefulStop returns; one that cannot (a client that does
			// not read what was sent) has its connection closed.
			s.endingOnce.Do(func() { close(s.ending) })
			select {
			case <-stopped:
			case <-time.After(shutdownGrace):
				s.srv.Stop()
				<-stopped
			}
		}
		tick.Stop()
		break
	}
	s.mu.Lock()
	regions := s.regions
	s.regions = map[string]*region{}
	s.mu.Unlock()
	for _, r := range regions {
		r.drop()
	}
}

// shutdownGrace bounds how long Shutdown waits for the streams it ends
// to send what they queued.
const shutdownGrace = 10 * time.Second

// model finds a model the caller may use for op, at version ("" for
// any).
func (s *Server) model(ctx context.Context, op dlgrpc.Op, name, version string) (*served, error) {
	s.mu.RLock()
	m := s.models[name]
	s.mu.RUnlock()
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "dloip: model %q: %v", name, ErrNotFound)
	}
	if err := s.srv.Allowed(ctx, op, name); err != nil {
		return nil, err
	}
	if version != "" && len(m.meta.Versions) > 0 && !slices.Contains(m.meta.Versions, version) {
		return nil, status.Errorf(codes.NotFound, "dloip: model %q has no version %q (it has %q)", name, version, m.meta.Versions)
	}
	return m, nil
}

// ServerLive implements the protocol: live while it answers.
func (service) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (s *Server) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// ServerReady implements the protocol: ready until Shutdown.
func (v service) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	s := v.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &pb.ServerReadyResponse{Ready: !s.closed}, nil
}

// ModelReady implements the protocol: a registered model the caller may
// use is ready; an unknown model or version is codes.NotFound, as kserve
// answers.
func (v service) ModelReady(ctx context.Context, r *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	if _, err := v.s.model(ctx, dlgrpc.OpRead, r.GetName(), r.GetVersion()); err != nil {
		return nil, err
	}
	return &pb.ModelReadyResponse{Ready: true}, nil
}

// ServerMetadata implements the protocol; the extension it names is
// Triton's "system_shared_memory".
func (v service) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	s := v.s
	return &pb.ServerMetadataResponse{Name: s.opts.Name, Version: s.opts.Version, Extensions: []string{"system_shared_memory"}}, nil
}

// ModelMetadata implements the protocol.
func (v service) ModelMetadata(ctx context.Context, r *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	s := v.s
	m, err := s.model(ctx, dlgrpc.OpRead, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	return &pb.ModelMetadataResponse{Name: m.meta.Name, Versions: m.meta.Versions, Platform: m.meta.Platform,
		Inputs: tensorMetaPB(m.meta.Inputs), Outputs: tensorMetaPB(m.meta.Outputs)}, nil
}

const methodInfer = "/inference.GRPCInferenceService/ModelInfer"

func inferHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(service).s
	in := newInInfer(new(pb.ModelInferRequest), fieldRawInput, s.opts.Allocator, s.opts.MaxTensorBytes)
	if err := dec(in); err != nil {
		return nil, err
	}
	if in.err != nil {
		// a malformed message or one beyond a limit: the status its
		// error has, rather than gRPC's codes.Internal
		return nil, statusOf(fmt.Errorf("dloip: request: %w", in.err))
	}
	s.work.requests(1)
	defer s.work.requests(-1)
	if interceptor == nil {
		return s.infer(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: methodInfer}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.infer(ctx, req.(*inInfer))
	})
}

// infer runs one ModelInfer.
func (s *Server) infer(ctx context.Context, in *inInfer) (_ any, err error) {
	defer in.freeRest()
	r := in.msg.(*pb.ModelInferRequest)
	m, err := s.model(ctx, dlgrpc.OpInfer, r.GetModelName(), r.GetModelVersion())
	if err != nil {
		return nil, err
	}
	fail := func(err error) (any, error) {
		return nil, statusOf(fmt.Errorf("dloip: model %q: %w", m.meta.Name, err))
	}
	req, err := s.request(ctx, m, r, in)
	if err != nil {
		return fail(err)
	}
	// The inputs are released once the outputs are taken: an output may
	// be an input, or share its memory.
	defer req.close()
	outs, err := s.runModel(ctx, m, req)
	defer s.releaseOutputs(m.meta.Name, outs)
	if err != nil {
		return fail(err)
	}
	resp, err := s.response(ctx, m, r, req.Outputs, outs)
	if err != nil {
		return fail(err)
	}
	return resp, nil
}

// close releases the request's inputs.
func (r *Request) close() {
	for _, t := range r.Inputs {
		t.Close()
	}
}

// runModel runs m's Infer on req, a panic in it an error wrapping
// dlgrpc.ErrPanic (reported to the Logger). The outputs' Releases are
// the caller's to run (releaseOutputs), after their tensors are taken.
// A StreamModel is refused with codes.Unimplemented, as Triton refuses
// a decoupled model outside a stream.
func (s *Server) runModel(ctx context.Context, m *served, req *Request) (outs []Output, err error) {
	if m.m == nil {
		return nil, errDecoupled(m.meta.Name)
	}
	err = s.srv.Call(fmt.Sprintf("model %q", m.meta.Name), func() (err error) {
		outs, err = m.m.Infer(ctx, req)
		return err
	})
	return outs, err
}

// releaseOutputs runs the Release of each output that has one.
func (s *Server) releaseOutputs(model string, outs []Output) {
	for _, o := range outs {
		if o.Release != nil {
			_ = s.srv.Call(fmt.Sprintf("model %q: output %q: Release", model, o.Name), func() error { o.Release(); return nil })
		}
	}
}

// takenOutput is an output to send: its tensor taken (held until
// released), its name and parameters.
type takenOutput struct {
	name   string
	params Parameters
	taken
}

// takeOutputs takes the outputs the request asked for from those the
// model returned: all it lists when none were asked for (every one
// returned, for a Dynamic model), each checked against its metadata. On
// error nothing is held; on success the caller releases them
// (closeTaken), once the bytes are sent.
func (s *Server) takeOutputs(m *served, asked []string, outs []Output) ([]takenOutput, error) {
	if len(asked) == 0 {
		if m.meta.Dynamic {
			for _, o := range outs {
				asked = append(asked, o.Name)
			}
		} else {
			for _, o := range m.meta.Outputs {
				asked = append(asked, o.Name)
			}
		}
	}
	held := make([]takenOutput, 0, len(asked))
	fail := func(err error) ([]takenOutput, error) {
		closeTaken(held)
		return nil, err
	}
	for _, name := range asked {
		i := slices.IndexFunc(outs, func(o Output) bool { return o.Name == name })
		if i < 0 || outs[i].Tensor == nil {
			return fail(fmt.Errorf("the model returned no output %q", name))
		}
		var t taken
		if err := s.srv.Call(fmt.Sprintf("model %q: output %q", m.meta.Name, name), func() (err error) {
			t, err = take("output", name, outs[i].Tensor)
			return err
		}); err != nil {
			return fail(err)
		}
		held = append(held, takenOutput{name: name, params: outs[i].Parameters, taken: t})
		if tm, ok := findMeta(m.meta.Outputs, name); ok && tm.Datatype != "" && tm.Datatype != t.datatype {
			return fail(&dlpack.FieldError{Field: fmt.Sprintf("output %q: datatype", name), Value: t.datatype, Err: errModel,
				Why: fmt.Sprintf("the model's metadata says %s", tm.Datatype)})
		}
	}
	return held, nil
}

// closeTaken releases the outputs taken.
func closeTaken(ts []takenOutput) {
	for _, t := range ts {
		t.release()
	}
}

// request checks a received request against the model's metadata and
// makes its inputs.
func (s *Server) request(ctx context.Context, m *served, r *pb.ModelInferRequest, in *inInfer) (*Request, error) {
	ws := make([]wireTensor, len(r.Inputs))
	for i, t := range r.Inputs {
		ws[i] = wireTensor{name: t.GetName(), datatype: t.GetDatatype(), shape: t.GetShape(), params: t.GetParameters(), contents: t.GetContents()}
	}
	// Shapes and datatypes first, against the metadata and the limits,
	// before any memory is placed.
	if err := s.checkInputs(m.meta, ws); err != nil {
		return nil, err
	}
	outputs := make([]string, len(r.Outputs))
	for i, o := range r.Outputs {
		outputs[i] = o.GetName()
	}
	if err := checkOutputs(m.meta, outputs); err != nil {
		return nil, err
	}
	shm := &shmPlacer{
		is: func(w wireTensor) bool { _, ok := w.params[ParamRegion]; return ok },
		make: func(w wireTensor, _ bool) (*Tensor, error) {
			field := fmt.Sprintf("input %q", w.name)
			name, off, n, _, err := shmParams(field, w.params)
			if err != nil {
				return nil, err
			}
			if w.datatype != BYTES {
				dt, _ := ParseDatatype(w.datatype)
				if want, _ := byteSize(dt, w.shape); uint64(want) != n {
					return nil, &dlpack.FieldError{Field: field + ": " + ParamByteSize, Value: n, Err: ErrInvalid,
						Why: fmt.Sprintf("%s %v needs %d bytes", w.datatype, w.shape, want)}
				}
			}
			return s.regionTensor(ctx, w, name, off, n)
		},
	}
	ts, err := place("input", "raw_input_contents", ws, in, shm)
	if err != nil {
		return nil, err
	}
	return &Request{Model: m.meta.Name, Version: r.GetModelVersion(), ID: r.GetId(), Parameters: paramsOf(r.GetParameters()),
		Inputs: ts, Outputs: outputs}, nil
}

// response takes the model's outputs (those asked for, all when none
// were) and makes the message to send from their own memory; the
// tensors are released once gRPC has written them.
func (s *Server) response(ctx context.Context, m *served, r *pb.ModelInferRequest, asked []string, outs []Output) (*outInfer, error) {
	msg, raws, mapped, held, err := s.outputs(ctx, m, r, asked, outs)
	if err != nil {
		return nil, err
	}
	// A call gives back its MaxConcurrentCalls place when it returns,
	// before gRPC writes its answer: the answers a client does not read
	// are bounded here instead, to what that many calls could hold.
	var n int64
	for _, b := range raws {
		n += int64(len(b))
	}
	if limit := int64(s.opts.MaxConcurrentCalls) * int64(s.opts.MaxMessageBytes); s.unsent.Add(n) > limit && n > 0 {
		s.unsent.Add(-n)
		closeTaken(held)
		return nil, fmt.Errorf("%w: the answers not yet written to their clients hold %d bytes, and this one's %d would pass MaxConcurrentCalls × MaxMessageBytes = %d", ErrLimit, s.unsent.Load(), n, limit)
	}
	h := s.srv.NewHold(func() {
		s.unsent.Add(-n)
		closeTaken(held)
	})
	out := newOutInfer(msg, fieldRawOutput, raws, mapped, h)
	out.once = dlgrpc.DropOnce(h, out)
	return out, nil
}

// outputs takes the model's outputs (those asked for, all when none
// were), writes those asked for in shared memory there, and makes the
// response's message (without raw contents) and the raw contents, each
// a taken tensor's own memory (mapped[i]: raws[i] lies in a file
// mapping). The caller releases held (closeTaken) once they are sent;
// on error nothing is held.
func (s *Server) outputs(ctx context.Context, m *served, r *pb.ModelInferRequest, asked []string, outs []Output) (msg *pb.ModelInferResponse, raws [][]byte, mapped []bool, held []takenOutput, err error) {
	msg = &pb.ModelInferResponse{ModelName: m.meta.Name, ModelVersion: r.GetModelVersion(), Id: r.GetId()}
	held, err = s.takeOutputs(m, asked, outs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	raws = make([][]byte, 0, len(held))
	for _, t := range held {
		params, err := t.params.toPB(fmt.Sprintf("output %q: parameters", t.name))
		if err != nil {
			closeTaken(held)
			return nil, nil, nil, nil, err
		}
		if j := slices.IndexFunc(r.Outputs, func(o *pb.ModelInferRequest_InferRequestedOutputTensor) bool { return o.GetName() == t.name }); j >= 0 {
			if ok, err := s.writeRegion(ctx, t.name, r.Outputs[j].GetParameters(), t.data); err != nil {
				closeTaken(held)
				return nil, nil, nil, nil, err
			} else if ok {
				// In shared memory: an empty raw entry keeps the raw
				// contents in step with the outputs, as Triton does, and
				// the output's parameters name the region.
				raws = append(raws, []byte{})
				mapped = append(mapped, false)
				msg.Outputs = append(msg.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: t.name, Datatype: t.datatype, Shape: t.shape, Parameters: r.Outputs[j].GetParameters()})
				continue
			}
		}
		raws = append(raws, t.data)
		mapped = append(mapped, t.mapped)
		msg.Outputs = append(msg.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: t.name, Datatype: t.datatype, Shape: t.shape, Parameters: params})
	}
	return msg, raws, mapped, held, nil
}

// checkInputs checks a request's inputs (names, datatypes, shapes)
// against a model's metadata and the tensor-byte limit, before any
// memory is placed: every listed input present unless optional, none
// unlisted unless the model is Dynamic, each of a datatype the model
// takes and a shape that fits. A BYTES input is counted at 4 bytes an
// element, the least it takes; its bytes are counted as they arrive.
func (s *Server) checkInputs(meta ModelMetadata, ws []wireTensor) error {
	var total int64
	for _, w := range ws {
		tm, listed := findMeta(meta.Inputs, w.name)
		if !listed && !meta.Dynamic {
			return &dlpack.FieldError{Field: "input", Value: fmt.Sprintf("%q", w.name), Err: ErrInvalid,
				Why: fmt.Sprintf("the model has no such input (it has %s)", names(meta.Inputs))}
		}
		if err := checkDatatype(w.datatype); err != nil {
			return fmt.Errorf("input %q: %w", w.name, err)
		}
		if listed && tm.Datatype != "" && w.datatype != tm.Datatype {
			return &dlpack.FieldError{Field: fmt.Sprintf("input %q: datatype", w.name), Value: w.datatype, Err: ErrInvalid,
				Why: fmt.Sprintf("the model takes %s", tm.Datatype)}
		}
		n, err := minBytes(w.datatype, w.shape)
		if err != nil {
			return fmt.Errorf("input %q: %w", w.name, err)
		}
		if listed && !shapeFits(tm.Shape, w.shape) {
			return &dlpack.FieldError{Field: fmt.Sprintf("input %q: shape", w.name), Value: w.shape, Err: ErrInvalid,
				Why: fmt.Sprintf("the model takes %v", tm.Shape)}
		}
		if total += n; total > s.opts.MaxTensorBytes {
			return &dlpack.FieldError{Field: fmt.Sprintf("input %q", w.name), Value: fmt.Sprintf("%d bytes of inputs", total), Err: ErrLimit,
				Why: fmt.Sprintf("the server takes %d at most (MaxTensorBytes)", s.opts.MaxTensorBytes)}
		}
	}
	for _, tm := range meta.Inputs {
		if !tm.Optional && !slices.ContainsFunc(ws, func(w wireTensor) bool { return w.name == tm.Name }) {
			return &dlpack.FieldError{Field: "input", Value: fmt.Sprintf("%q", tm.Name), Err: ErrInvalid, Why: "missing"}
		}
	}
	return nil
}

// checkOutputs checks the names of the outputs a request asks for
// against a model's metadata: each one it lists (any, for a Dynamic
// model), once.
func checkOutputs(meta ModelMetadata, asked []string) error {
	for i, name := range asked {
		if _, ok := findMeta(meta.Outputs, name); !ok && !meta.Dynamic {
			return &dlpack.FieldError{Field: "output", Value: fmt.Sprintf("%q", name), Err: ErrInvalid,
				Why: fmt.Sprintf("the model has no such output (it has %s)", names(meta.Outputs))}
		}
		if name == "" || slices.Contains(asked[:i], name) {
			return &dlpack.FieldError{Field: "output", Value: fmt.Sprintf("%q", name), Err: ErrInvalid, Why: "empty or asked for twice"}
		}
	}
	return nil
}

func findMeta(ts []TensorMetadata, name string) (TensorMetadata, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return TensorMetadata{}, false
}

func names(ts []TensorMetadata) string {
	q := make([]string, len(ts))
	for i, t := range ts {
		q[i] = fmt.Sprintf("%q", t.Name)
	}
	return strings.Join(q, ", ")
}

// shapeFits reports whether shape matches the metadata's, -1 matching any
// size.
func shapeFits(meta, shape []int64) bool {
	if meta == nil {
		return true
	}
	if len(meta) != len(shape) {
		return false
	}
	for i, d := range meta {
		if d != -1 && d != shape[i] {
			return false
		}
	}
	return true
}

// statusOf gives an error its gRPC status code (dlgrpc.Status, and
// ErrNotFound codes.NotFound).
func statusOf(err error) error {
	if errors.Is(err, ErrNotFound) {
		if _, ok := status.FromError(err); !ok {
			return status.Error(codes.NotFound, err.Error())
		}
	}
	return dlgrpc.Status(err, ErrInvalid, ErrDatatype)
}
