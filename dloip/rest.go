package dloip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/internal/fault"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// restState is a Server's REST binding: its handler, made once, and the
// HTTP servers ServeREST runs, which Shutdown stops.
type restState struct {
	once    sync.Once
	handler http.Handler
	mu      sync.Mutex
	servers map[*http.Server]bool
	closed  bool
}

// HTTPHandler is the Server's REST binding of the protocol (KServe v2's
// HTTP/REST API, which Triton serves too), on the same models as its
// gRPC service:
//
//	GET  /v2/health/live                               {"live":true}
//	GET  /v2/health/ready                              {"ready":true}, 503 after Shutdown
//	GET  /v2                                           server metadata
//	GET  /v2/models/{name}[/versions/{v}]              model metadata
//	GET  /v2/models/{name}[/versions/{v}]/ready        {"name":...,"ready":true}
//	POST /v2/models/{name}[/versions/{v}]/infer        inference
//
// An inference request's tensors come as JSON ("data": the values, flat
// or nested, in row-major order) or, with Triton's binary-data
// extension, as binary data after the JSON (HeaderInferenceContentLength,
// ParamBinaryDataSize), read straight into 64-byte aligned buffers of
// Options.Allocator that the inputs share. Outputs go as JSON, or as
// binary data where the request asks (an output's "binary_data"
// parameter, or the request's "binary_data_output"), written from the
// model's tensors themselves. Each request is admitted as a gRPC call is
// (the same Tokens or Authenticate, from the Authorization header, the
// same Allow, the same MaxConcurrentCalls places), before its body is
// read; Options.MaxMessageBytes bounds its body, MaxTensorBytes its
// tensors, and every length it declares is checked before anything is
// allocated for it. An error is answered with the status of its gRPC
// code (400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
// 404 NotFound, 413 a body or tensors beyond a limit, 429 beyond
// MaxConcurrentCalls, 500 Internal, 503 Unavailable) and the body
// {"error": "..."}.
//
// ServeREST serves it with the Server's TLS and timeouts; mounted in a
// server of the caller's, TLS and the timeouts are that server's.
func (s *Server) HTTPHandler() http.Handler {
	s.rest.once.Do(func() { s.rest.handler = s.newRESTHandler() })
	return s.rest.handler
}

// ServeREST serves the REST binding (HTTPHandler) on lis until Shutdown,
// which waits for the requests running; it returns nil then. With
// Options.TLS it serves HTTPS (HTTP/2 to clients that ask for it),
// HTTP/1.1 in plaintext otherwise. Options.HandshakeTimeout bounds a
// connection's TLS handshake and each request's headers; a body that
// makes no progress for Options.StallTimeout, or a response its client
// does not read for as long, ends its request and its connection, and a
// connection idle between requests for StallTimeout is closed.
func (s *Server) ServeREST(lis net.Listener) error {
	hs := &http.Server{
		Handler:           s.HTTPHandler(),
		ReadHeaderTimeout: s.opts.HandshakeTimeout,
		IdleTimeout:       max(s.opts.StallTimeout, 0),
		MaxHeaderBytes:    restMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug),
	}
	if s.opts.TLS != nil {
		hs.TLSConfig = s.opts.TLS.Clone()
	}
	s.rest.mu.Lock()
	if s.rest.closed {
		s.rest.mu.Unlock()
		lis.Close()
		return nil
	}
	if s.rest.servers == nil {
		s.rest.servers = map[*http.Server]bool{}
	}
	s.rest.servers[hs] = true
	s.rest.mu.Unlock()
	var err error
	if s.opts.TLS != nil {
		err = hs.ServeTLS(lis, "", "")
	} else {
		err = hs.Serve(lis)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// restMaxHeaderBytes bounds a REST request's headers.
const restMaxHeaderBytes = 64 << 10

// shutdown stops the HTTP servers, each once its running requests end.
func (r *restState) shutdown() {
	r.mu.Lock()
	r.closed = true
	servers := r.servers
	r.servers = nil
	r.mu.Unlock()
	for hs := range servers {
		hs.Shutdown(context.Background())
	}
}

// restStatusError is an error answered with its own HTTP status.
type restStatusError struct {
	code int
	err  error
}

func (e *restStatusError) Error() string { return e.err.Error() }
func (e *restStatusError) Unwrap() error { return e.err }

// restHTTPStatus is the HTTP status of a gRPC code.
func restHTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Canceled:
		return 499
	}
	return http.StatusInternalServerError
}

// restFail answers err: {"error": its message}, with the HTTP status of
// its gRPC status (restStatusError's own).
func restFail(w http.ResponseWriter, err error) {
	code := 0
	var se *restStatusError
	if errors.As(err, &se) {
		code = se.code
	}
	st, _ := status.FromError(statusOf(err))
	if code == 0 {
		code = restHTTPStatus(st.Code())
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	restWriteJSON(w, code, map[string]string{"error": st.Message()})
}

// restWriteJSON answers v as JSON with code.
func restWriteJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"dloip: an answer that has no JSON"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

// newRESTHandler routes the protocol's endpoints; anything else is
// answered 404 (an unknown path) or 405 (another method), in JSON.
func (s *Server) newRESTHandler() http.Handler {
	mux := http.NewServeMux()
	route := func(method string, fn func(w http.ResponseWriter, r *http.Request) error, patterns ...string) {
		h := func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				w.Header().Set("Allow", method)
				restWriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("dloip: %s takes %s, not %s", r.URL.Path, method, r.Method)})
				return
			}
			ctx, done, err := s.srv.AdmitHTTP(r)
			if err != nil {
				restFail(w, err)
				return
			}
			defer done()
			if err := fn(w, r.WithContext(ctx)); err != nil {
				restFail(w, err)
			}
		}
		for _, p := range patterns {
			mux.HandleFunc(p, h)
		}
	}
	route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		restWriteJSON(w, http.StatusOK, map[string]bool{"live": true})
		return nil
	}, "/v2/health/live")
	route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		s.mu.RLock()
		closed := s.closed
		s.mu.RUnlock()
		if closed {
			return status.Error(codes.Unavailable, "dloip: the server is shutting down")
		}
		restWriteJSON(w, http.StatusOK, map[string]bool{"ready": true})
		return nil
	}, "/v2/health/ready")
	route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		restWriteJSON(w, http.StatusOK, restServerMeta{Name: s.opts.Name, Version: s.opts.Version, Extensions: []string{"binary_tensor_data"}})
		return nil
	}, "/v2", "/v2/{$}")
	route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.model(r.Context(), dlgrpc.OpRead, r.PathValue("name"), r.PathValue("version"))
		if err != nil {
			return err
		}
		restWriteJSON(w, http.StatusOK, restModelMetaOf(m.meta))
		return nil
	}, "/v2/models/{name}", "/v2/models/{name}/versions/{version}")
	route(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		m, err := s.model(r.Context(), dlgrpc.OpRead, r.PathValue("name"), r.PathValue("version"))
		if err != nil {
			return err
		}
		restWriteJSON(w, http.StatusOK, map[string]any{"name": m.meta.Name, "ready": true})
		return nil
	}, "/v2/models/{name}/ready", "/v2/models/{name}/versions/{version}/ready")
	route(http.MethodPost, s.restInfer, "/v2/models/{name}/infer", "/v2/models/{name}/versions/{version}/infer")
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		restWriteJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("dloip: no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// restServerMeta and restModelMeta are the protocol's metadata as JSON.
type restServerMeta struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

type restTensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

type restModelMeta struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions"`
	Platform string           `json:"platform"`
	Inputs   []restTensorMeta `json:"inputs"`
	Outputs  []restTensorMeta `json:"outputs"`
}

func restModelMetaOf(m ModelMetadata) restModelMeta {
	list := func(ts []TensorMetadata) []restTensorMeta {
		out := make([]restTensorMeta, len(ts))
		for i, t := range ts {
			out[i] = restTensorMeta{Name: t.Name, Datatype: t.Datatype, Shape: append([]int64{}, t.Shape...)}
		}
		return out
	}
	return restModelMeta{Name: m.Name, Versions: append([]string{}, m.Versions...), Platform: m.Platform, Inputs: list(m.Inputs), Outputs: list(m.Outputs)}
}

func (m restModelMeta) metadata() ModelMetadata {
	list := func(ts []restTensorMeta) []TensorMetadata {
		out := make([]TensorMetadata, len(ts))
		for i, t := range ts {
			out[i] = TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: append([]int64{}, t.Shape...)}
		}
		return out
	}
	return ModelMetadata{Name: m.Name, Versions: m.Versions, Platform: m.Platform, Inputs: list(m.Inputs), Outputs: list(m.Outputs)}
}

// restInfer runs one inference request.
func (s *Server) restInfer(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	version := r.PathValue("version")
	m, err := s.model(ctx, dlgrpc.OpInfer, r.PathValue("name"), version)
	if err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("dloip: model %q: %w", m.meta.Name, err) }
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &restStatusError{code: http.StatusUnsupportedMediaType, err: fmt.Errorf(
			"dloip: model %q: Content-Encoding %q: the server takes bodies as they are, not compressed", m.meta.Name, enc)}
	}
	rc := http.NewResponseController(w)
	stall := s.opts.StallTimeout
	lim := restLimits{maxBody: int64(s.opts.MaxMessageBytes), maxTensor: s.opts.MaxTensorBytes, alloc: s.opts.Allocator}
	if stall > 0 {
		lim.progress = func() { rc.SetReadDeadline(time.Now().Add(stall)) }
	}
	var asked []string
	var binaryOut []bool
	in, err := readREST(http.MaxBytesReader(w, r.Body, lim.maxBody), r.ContentLength, r.Header.Get(HeaderInferenceContentLength), true, lim,
		func(msg *restMessage) (err error) {
			asked, binaryOut, err = s.restCheck(m.meta, msg)
			return err
		})
	if stall > 0 {
		rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if errors.Is(err, ErrLimit) {
			return &restStatusError{code: http.StatusRequestEntityTooLarge, err: fail(err)}
		}
		return fail(err)
	}
	allBinary, _ := in.msg.params["binary_data_output"].(bool)
	ins, err := in.tensors()
	if err != nil {
		return fail(err)
	}
	// The model sees the request's headers as it sees a gRPC call's
	// metadata.
	md := make(metadata.MD, len(r.Header))
	for k, v := range r.Header {
		md[strings.ToLower(k)] = v
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	req := &Request{Model: m.meta.Name, Version: version, ID: in.msg.id, Parameters: in.msg.params, Inputs: ins, Outputs: asked}
	// The inputs are released once the outputs are taken: an output may
	// be an input, or share its memory.
	defer req.close()
	outs, err := s.runModel(ctx, m, req)
	defer s.releaseOutputs(m.meta.Name, outs)
	if err != nil {
		return fail(err)
	}
	held, err := s.takeOutputs(m, asked, outs)
	if err != nil {
		return fail(err)
	}
	defer closeTaken(held)
	touts := make([]restTensorOut, len(held))
	for i, t := range held {
		touts[i] = restTensorOut{name: t.name, params: t.params, taken: t.taken, binary: allBinary}
		if i < len(binaryOut) {
			touts[i].binary = binaryOut[i]
		}
		if t.mapped && len(t.data) > 0 {
			// In a file mapping another process may cut short: copied
			// now, under a fault guard, rather than faulting in the
			// middle of the answer.
			b := make([]byte, len(t.data))
			err := fault.Guard(uintptr(unsafe.Pointer(unsafe.SliceData(t.data))), uintptr(len(t.data)), func() error { copy(b, t.data); return nil })
			if fe, ok := err.(*fault.Error); ok {
				return fail(&dlpack.FieldError{Field: fmt.Sprintf("output %q: data", t.name), Value: fmt.Sprintf("byte %d of %d", fe.Offset, len(t.data)), Err: ErrTruncated,
					Why: "the tensor's file was cut short while mapped; the lost pages cannot be read"})
			}
			touts[i].data = b
		}
	}
	head := appendJSONString([]byte(`{"model_name":`), []byte(m.meta.Name))
	head = appendJSONString(append(head, `,"model_version":`...), []byte(version))
	if req.ID != "" {
		head = appendJSONString(append(head, `,"id":`...), []byte(req.ID))
	}
	js, err := restStream(append(head, ','), "output", "outputs", touts, []byte{'}'})
	if err != nil {
		return fail(err)
	}
	return restWrite(w, rc, js, touts, stall)
}

// restCheck checks a request's JSON against a model's metadata and the
// limits, before anything is allocated for its tensors (checkInputs,
// checkOutputs); it returns the names of the outputs asked for and
// whether each goes back as binary data.
func (s *Server) restCheck(meta ModelMetadata, msg *restMessage) (asked []string, binary []bool, err error) {
	ws := make([]wireTensor, len(msg.tensors))
	for i, t := range msg.tensors {
		if _, ok := t.params[ParamRegion]; ok {
			return nil, nil, restNoShm("input", t.name)
		}
		ws[i] = wireTensor{name: t.name, datatype: t.datatype, shape: t.shape}
	}
	if err := s.checkInputs(meta, ws); err != nil {
		return nil, nil, err
	}
	all, _ := msg.params["binary_data_output"].(bool)
	for _, o := range msg.outputs {
		if _, ok := o.params[ParamRegion]; ok {
			return nil, nil, restNoShm("output", o.name)
		}
		b, ok := o.params["binary_data"].(bool)
		asked, binary = append(asked, o.name), append(binary, b || !ok && all)
	}
	return asked, binary, checkOutputs(meta, asked)
}

// pieces are the buffers restWrite writes JSON from, a piece at a time.
var pieces = sync.Pool{New: func() any { b := make([]byte, 0, jsonPiece+1024); return &b }}

// restNoShm refuses a tensor in shared memory: the REST binding does not
// serve Triton's shared-memory parameters.
func restNoShm(what, name string) error {
	return &dlpack.FieldError{Field: fmt.Sprintf("%s %q: parameters", what, name), Value: ParamRegion, Err: ErrInvalid,
		Why: "the REST binding does not serve shared memory; use the gRPC service"}
}

// restWrite answers a message: its JSON, written a piece at a time, then
// the binary data of its tensors, from their own memory. The headers say
// the JSON's length when there is binary data (and the whole length
// whenever it is known).
func restWrite(w http.ResponseWriter, rc *http.ResponseController, js *jsonStream, ts []restTensorOut, stall time.Duration) error {
	var bin int64
	anyBinary := false
	for _, t := range ts {
		if t.binary {
			anyBinary = true
			bin += int64(len(t.data))
		}
	}
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	buf, done := js.next((*bp)[:0])
	defer func() { *bp = buf[:0] }()
	jsonLen := int64(-1)
	switch {
	case done:
		jsonLen = int64(len(buf))
	case anyBinary:
		jsonLen = int64(len(buf)) + js.size()
	}
	h := w.Header()
	if anyBinary {
		h.Set(HeaderInferenceContentLength, strconv.FormatInt(jsonLen, 10))
		h.Set("Content-Type", "application/octet-stream")
	} else {
		h.Set("Content-Type", "application/json")
	}
	if jsonLen >= 0 {
		h.Set("Content-Length", strconv.FormatInt(jsonLen+bin, 10))
	}
	push := func() {
		if stall > 0 {
			rc.SetWriteDeadline(time.Now().Add(stall))
		}
	}
	push()
	w.WriteHeader(http.StatusOK)
	for {
		if _, err := w.Write(buf); err != nil {
			return nil // the client is gone: nothing more to answer
		}
		if done {
			break
		}
		push()
		buf, done = js.next(buf[:0])
	}
	for _, t := range ts {
		if !t.binary {
			continue
		}
		for b := t.data; len(b) > 0; {
			k := min(len(b), restChunk)
			push()
			if _, err := w.Write(b[:k]); err != nil {
				return nil
			}
			b = b[k:]
		}
	}
	push()
	rc.Flush()
	if stall > 0 {
		rc.SetWriteDeadline(time.Time{})
	}
	return nil
}
