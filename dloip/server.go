package dloip

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Options configure a Server. The zero Options serve plaintext to anyone,
// which suits only tests on loopback.
type Options struct {
	// Name and Version are what ServerMetadata answers ("dloip" and ""
	// when empty).
	Name, Version string
	// TLS, when set, is the server's TLS configuration (certificates,
	// client authentication).
	TLS *tls.Config
	// Tokens maps each accepted bearer token to the principal it
	// authenticates. When set, every call needs the gRPC metadata
	// "authorization: Bearer <token>" (what tritonclient sends with
	// headers={"authorization": "Bearer ..."}); a missing or unknown token
	// gets codes.Unauthenticated.
	Tokens map[string]string
	// Allow, when set, decides per principal ("" without Tokens) and model
	// whether the model may be used (ModelReady, ModelMetadata,
	// ModelInfer); a refusal gets codes.PermissionDenied.
	Allow func(principal, model string) bool
	// MaxMessageBytes bounds every gRPC message either way
	// (DefaultMaxMessageBytes when zero); a larger request gets
	// codes.ResourceExhausted from gRPC, and a response that would exceed
	// it fails the call with codes.ResourceExhausted.
	MaxMessageBytes int
	// MaxTensorBytes bounds the bytes of the inputs of one request,
	// shared-memory ones included (codes.ResourceExhausted). Zero: no
	// bound beyond the message limit.
	MaxTensorBytes int64
}

// Server serves Models over the Open Inference Protocol's gRPC service
// (inference.GRPCInferenceService), to any client of the protocol:
// tritonclient, kserve's InferenceGRPCClient, a dloip Client, ... Build
// it with NewServer, Register models, Serve a listener, Shutdown at the
// end.
type Server struct {
	opts   Options
	grpc   *grpc.Server
	mu     sync.RWMutex
	models map[string]*served
	// regions: the registered shared-memory regions (shm.go).
	regions map[string]*region
	closed  bool
}

// service is the Server as gRPC sees it: the protocol's methods.
type service struct {
	pb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// served is a registered model and its metadata, read once.
type served struct {
	m    Model
	meta ModelMetadata
}

type principalKey struct{}

// NewServer makes a Server; nothing listens until Serve.
func NewServer(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Name == "" {
		opts.Name = "dloip"
	}
	s := &Server{opts: opts, models: map[string]*served{}, regions: map[string]*region{}}
	window, connWindow, rbuf, wbuf := transportSizes(opts.MaxMessageBytes)
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.StaticStreamWindowSize(window),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ReadBufferSize(rbuf),
		grpc.WriteBufferSize(wbuf),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := s.authenticate(ctx)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
	}
	if opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(gopts...)
	// The generated service, but ModelInfer decodes and encodes through
	// the codec's own message types (raw contents not copied by protobuf).
	desc := pb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ModelInfer" {
			desc.Methods[i].Handler = inferHandler
		}
	}
	s.grpc.RegisterService(&desc, service{s: s})
	return s
}

// Register serves m under the name of its metadata, replacing any model
// of that name. The metadata must name the model and give every input
// and output a name and a datatype the bridge carries (ErrDatatype
// otherwise).
func (s *Server) Register(m Model) error {
	meta := m.Metadata()
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
			if _, err := ParseDatatype(t.Datatype); err != nil {
				return fmt.Errorf("dloip: register %q: %s %q: %w", meta.Name, list.what, t.Name, err)
			}
			for i, d := range t.Shape {
				if d < -1 {
					return &dlpack.FieldError{Field: fmt.Sprintf("metadata %q: %s %q: shape[%d]", meta.Name, list.what, t.Name, i), Value: d, Err: ErrShape, Why: "-1 (variable) or a size"}
				}
			}
		}
	}
	s.mu.Lock()
	s.models[meta.Name] = &served{m: m, meta: meta}
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

// Serve serves on lis until Shutdown.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// Shutdown stops accepting calls, waits for the running ones, and
// stops; the shared-memory regions are unregistered (each unmapped once
// no tensor uses it).
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.grpc.GracefulStop()
	s.mu.Lock()
	regions := s.regions
	s.regions = map[string]*region{}
	s.mu.Unlock()
	for _, r := range regions {
		r.drop()
	}
}

// authenticate checks the bearer token when Tokens is set and puts the
// principal in the context.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	if s.opts.Tokens == nil {
		return context.WithValue(ctx, principalKey{}, ""), nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		// the scheme is case-insensitive (RFC 9110 11.1): "bearer" too
		if len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
			token = v[len("Bearer "):]
		}
	}
	if token == "" {
		return nil, status.Error(codes.Unauthenticated, "dloip: no bearer token in the authorization metadata")
	}
	principal, found := "", false
	for t, p := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			principal, found = p, true
		}
	}
	if !found {
		return nil, status.Error(codes.Unauthenticated, "dloip: unknown bearer token")
	}
	return context.WithValue(ctx, principalKey{}, principal), nil
}

// model finds a model the caller may use, at version ("" for any).
func (s *Server) model(ctx context.Context, name, version string) (*served, error) {
	s.mu.RLock()
	m := s.models[name]
	s.mu.RUnlock()
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "dloip: model %q: %v", name, ErrNotFound)
	}
	if s.opts.Allow != nil {
		p, _ := ctx.Value(principalKey{}).(string)
		if !s.opts.Allow(p, name) {
			return nil, status.Errorf(codes.PermissionDenied, "dloip: %q may not use model %q", p, name)
		}
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

// ServerReady implements the protocol: ready until Shutdown.
func (v service) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	s := v.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &pb.ServerReadyResponse{Ready: !s.closed}, nil
}

// ModelReady implements the protocol: a registered model the caller may
// use is ready; an unknown one is not (no error, as Triton answers).
func (v service) ModelReady(ctx context.Context, r *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	s := v.s
	_, err := s.model(ctx, r.GetName(), r.GetVersion())
	if status.Code(err) == codes.NotFound {
		return &pb.ModelReadyResponse{Ready: false}, nil
	}
	if err != nil {
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
	m, err := s.model(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	return &pb.ModelMetadataResponse{Name: m.meta.Name, Versions: m.meta.Versions, Platform: m.meta.Platform,
		Inputs: tensorMetaPB(m.meta.Inputs), Outputs: tensorMetaPB(m.meta.Outputs)}, nil
}

func inferHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := &inInfer{msg: new(pb.ModelInferRequest), field: fieldRawInput}
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(service).s
	if interceptor == nil {
		return s.infer(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: methodInfer}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.infer(ctx, req.(*inInfer))
	})
}

// infer runs one ModelInfer.
func (s *Server) infer(ctx context.Context, in *inInfer) (any, error) {
	r := in.msg.(*pb.ModelInferRequest)
	m, err := s.model(ctx, r.GetModelName(), r.GetModelVersion())
	if err != nil {
		return nil, err
	}
	req, err := s.request(m, r, in)
	if err != nil {
		return nil, statusOf(fmt.Errorf("dloip: model %q: %w", m.meta.Name, err))
	}
	// The inputs are released once the outputs are taken: an output may
	// be an input, or share its memory.
	defer func() {
		for _, t := range req.Inputs {
			t.Close()
		}
	}()
	outs, err := m.m.Infer(ctx, req)
	defer func() {
		for _, o := range outs {
			if o.Release != nil {
				o.Release()
			}
		}
	}()
	if err != nil {
		return nil, statusOf(fmt.Errorf("dloip: model %q: %w", m.meta.Name, err))
	}
	resp, err := s.response(m, r, req.Outputs, outs)
	if err != nil {
		return nil, statusOf(fmt.Errorf("dloip: model %q: %w", m.meta.Name, err))
	}
	return resp, nil
}

// request checks a received request against the model's metadata and
// makes its inputs.
func (s *Server) request(m *served, r *pb.ModelInferRequest, in *inInfer) (*Request, error) {
	ws := make([]wireTensor, len(r.Inputs))
	for i, t := range r.Inputs {
		ws[i] = wireTensor{name: t.GetName(), datatype: t.GetDatatype(), shape: t.GetShape(), params: t.GetParameters(), contents: t.GetContents()}
	}
	// Shapes and datatypes first, against the metadata, before any
	// memory is placed.
	var total int64
	for _, w := range ws {
		meta, ok := findMeta(m.meta.Inputs, w.name)
		if !ok {
			return nil, &dlpack.FieldError{Field: "input", Value: fmt.Sprintf("%q", w.name), Err: ErrInvalid,
				Why: fmt.Sprintf("the model has no such input (it has %s)", names(m.meta.Inputs))}
		}
		if w.datatype != meta.Datatype {
			if _, err := ParseDatatype(w.datatype); err != nil {
				return nil, fmt.Errorf("input %q: %w", w.name, err)
			}
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("input %q: datatype", w.name), Value: w.datatype, Err: ErrInvalid,
				Why: fmt.Sprintf("the model takes %s", meta.Datatype)}
		}
		dt, _ := ParseDatatype(w.datatype)
		n, err := byteSize(dt, w.shape)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", w.name, err)
		}
		if !shapeFits(meta.Shape, w.shape) {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("input %q: shape", w.name), Value: w.shape, Err: ErrInvalid,
				Why: fmt.Sprintf("the model takes %v", meta.Shape)}
		}
		if total += n; s.opts.MaxTensorBytes > 0 && total > s.opts.MaxTensorBytes {
			return nil, &dlpack.FieldError{Field: fmt.Sprintf("input %q", w.name), Value: fmt.Sprintf("%d bytes of inputs", total), Err: ErrLimit,
				Why: fmt.Sprintf("the server takes %d at most", s.opts.MaxTensorBytes)}
		}
	}
	for _, meta := range m.meta.Inputs {
		if !slices.ContainsFunc(ws, func(w wireTensor) bool { return w.name == meta.Name }) {
			return nil, &dlpack.FieldError{Field: "input", Value: fmt.Sprintf("%q", meta.Name), Err: ErrInvalid, Why: "missing"}
		}
	}
	var outputs []string
	for _, o := range r.Outputs {
		if _, ok := findMeta(m.meta.Outputs, o.GetName()); !ok {
			return nil, &dlpack.FieldError{Field: "output", Value: fmt.Sprintf("%q", o.GetName()), Err: ErrInvalid,
				Why: fmt.Sprintf("the model has no such output (it has %s)", names(m.meta.Outputs))}
		}
		if slices.Contains(outputs, o.GetName()) {
			return nil, &dlpack.FieldError{Field: "output", Value: fmt.Sprintf("%q", o.GetName()), Err: ErrInvalid, Why: "asked for twice"}
		}
		outputs = append(outputs, o.GetName())
	}
	shm := &shmPlacer{
		is: func(w wireTensor) bool { _, ok := w.params[ParamRegion]; return ok },
		make: func(w wireTensor) (*Tensor, error) {
			field := fmt.Sprintf("input %q", w.name)
			name, off, n, _, err := shmParams(field, w.params)
			if err != nil {
				return nil, err
			}
			dt, _ := ParseDatatype(w.datatype)
			if want, _ := byteSize(dt, w.shape); uint64(want) != n {
				return nil, &dlpack.FieldError{Field: field + ": " + ParamByteSize, Value: n, Err: ErrInvalid,
					Why: fmt.Sprintf("%s %v needs %d bytes", w.datatype, w.shape, want)}
			}
			return s.regionTensor(w, name, off, n)
		},
	}
	ts, err := place("input", "raw_input_contents", ws, in.raws, in.frees, shm)
	if err != nil {
		return nil, err
	}
	return &Request{Model: m.meta.Name, Version: r.GetModelVersion(), ID: r.GetId(), Parameters: paramsOf(r.GetParameters()),
		Inputs: ts, Outputs: outputs}, nil
}

// response takes the model's outputs (those asked for, all when none
// were) and makes the message to send from their own memory; the
// tensors are released once gRPC has written them.
func (s *Server) response(m *served, r *pb.ModelInferRequest, asked []string, outs []Output) (*outInfer, error) {
	msg := &pb.ModelInferResponse{ModelName: m.meta.Name, ModelVersion: r.GetModelVersion(), Id: r.GetId()}
	if len(asked) == 0 {
		for _, o := range m.meta.Outputs {
			asked = append(asked, o.Name)
		}
	}
	held := make([]taken, 0, len(asked))
	raws := make([][]byte, 0, len(asked))
	var mapped []bool
	fail := func(err error) (*outInfer, error) {
		closeAll(held)
		return nil, err
	}
	for _, name := range asked {
		i := slices.IndexFunc(outs, func(o Output) bool { return o.Name == name })
		if i < 0 || outs[i].Tensor == nil {
			return fail(fmt.Errorf("the model returned no output %q", name))
		}
		params, err := outs[i].Parameters.toPB(fmt.Sprintf("output %q: parameters", name))
		if err != nil {
			return fail(err)
		}
		t, err := take("output", name, outs[i].Tensor)
		if err != nil {
			return fail(err)
		}
		held = append(held, t)
		if j := slices.IndexFunc(r.Outputs, func(o *pb.ModelInferRequest_InferRequestedOutputTensor) bool { return o.GetName() == name }); j >= 0 {
			if ok, err := s.writeRegion(name, r.Outputs[j].GetParameters(), t.data); err != nil {
				return fail(err)
			} else if ok {
				// In shared memory: an empty raw entry keeps the raw
				// contents in step with the outputs, as Triton does.
				raws = append(raws, []byte{})
				mapped = append(mapped, false)
				msg.Outputs = append(msg.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: t.datatype, Shape: t.shape, Parameters: r.Outputs[j].GetParameters()})
				continue
			}
		}
		raws = append(raws, t.data)
		mapped = append(mapped, t.mapped)
		msg.Outputs = append(msg.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: t.datatype, Shape: t.shape, Parameters: params})
	}
	return newResponse(msg, raws, mapped, newHolding(func() { closeAll(held) })), nil
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

// statusOf gives an error its gRPC status code.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ErrLimit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrInvalid), errors.Is(err, errMessage), errors.Is(err, ErrDatatype), errors.Is(err, ErrShape):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
