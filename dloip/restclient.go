package dloip

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/internal/fault"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RESTClient calls a model server over the protocol's REST binding
// (KServe v2's HTTP/REST API): a dloip Server's ServeREST, Triton,
// KServe, MLServer, ... It has the methods of Client that the binding
// has, with the same types, and its methods may be called from many
// goroutines at once.
//
// By default its tensors travel both ways as binary data (Triton's
// binary-data extension, which Triton, KServe and a dloip Server have):
// each input's bytes are written from its producer's memory after the
// request's JSON, and each output's bytes are read straight into a
// 64-byte aligned buffer of ClientOptions.Allocator that the output
// Tensor shares. WithJSON gives a client that sends the values as JSON
// and asks for JSON back, for servers without the extension (MLServer).
// Outputs are taken as the server sends them, JSON or binary, either
// way.
type RESTClient struct {
	base   string
	hc     *http.Client
	tr     *http.Transport
	opts   dlgrpc.ClientOptions
	header http.Header
	json   bool
	closed *atomic.Bool
}

// DialREST makes a RESTClient of the server at baseURL
// ("http://host:port", "https://host:port/prefix"; "host:port" is http,
// or https with ClientOptions.TLS). ClientOptions are those of Dial:
// TLS (https only; nil: the system's roots), Token (the header
// "Authorization: Bearer <Token>", to baseURL's host and nowhere else:
// redirects are not followed), Headers (every request's),
// MaxMessageBytes (a request's body and a response's, either way),
// MaxTensorBytes (the bytes a response's outputs declare, checked before
// anything is allocated for them) and Allocator; Transport, which sizes
// gRPC's windows, has no use here. Connections are made on first use and
// kept for the next requests (HTTP/1.1).
func DialREST(baseURL string, opts ClientOptions) (*RESTClient, error) {
	o := opts.shared()
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxTensorBytes == 0 {
		o.MaxTensorBytes = dlgrpc.DefaultMaxTensorBytes
	}
	if o.Allocator == nil {
		o.Allocator = dlgrpc.DefaultAllocator
	}
	if !strings.Contains(baseURL, "://") {
		if o.TLS != nil {
			baseURL = "https://" + baseURL
		} else {
			baseURL = "http://" + baseURL
		}
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" || u.RawQuery != "" || u.Fragment != "" {
		return nil, &dlpack.FieldError{Field: "base URL", Value: fmt.Sprintf("%q", baseURL), Err: ErrInvalid, Why: "want http:// or https:// and a host, with no query"}
	}
	if u.Scheme == "http" && o.TLS != nil {
		return nil, &dlpack.FieldError{Field: "base URL", Value: fmt.Sprintf("%q", baseURL), Err: ErrInvalid, Why: "ClientOptions.TLS is set for a plaintext URL"}
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     o.TLS,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: dlgrpc.DefaultMaxConcurrentCalls,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	h := http.Header{}
	for k, v := range o.Headers {
		h.Set(k, v)
	}
	if o.Token != "" {
		h.Set("Authorization", "Bearer "+o.Token)
	}
	return &RESTClient{
		base: strings.TrimSuffix(u.String(), "/"), tr: tr, opts: o, header: h, closed: new(atomic.Bool),
		hc: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}, nil
}

// WithJSON is a client on the same connections whose Infer sends the
// inputs' values as JSON and asks for the outputs as JSON: for servers
// without the binary-data extension (MLServer), or a human reading the
// wire. A float's NaN travels as NaN (its payload is lost), which some
// servers' JSON readers refuse.
func (c *RESTClient) WithJSON() *RESTClient {
	d := *c
	d.json = true
	return &d
}

// Close closes the idle connections; a call made after Close (on c or a
// client WithJSON made of it) fails with an error wrapping
// dlpack.ErrClosed. Calling it again does nothing and returns nil.
func (c *RESTClient) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.tr.CloseIdleConnections()
	}
	return nil
}

func (c *RESTClient) errIfClosed(call string) error {
	if c.closed.Load() {
		return fmt.Errorf("dloip: %s: %w: the client is closed", call, dlpack.ErrClosed)
	}
	return nil
}

// RESTError is a REST server's answer of an error: its HTTP status and
// the message of its {"error": ...} body (the body itself, shortened,
// when it has none). Its GRPCStatus is the gRPC status of the same
// meaning (400 InvalidArgument, 401 Unauthenticated, 403
// PermissionDenied, 404 NotFound, 413 and 429 ResourceExhausted, 501
// Unimplemented, 503 Unavailable, any other Internal), so that
// status.Code reads a RESTClient's errors as it reads a Client's.
type RESTError struct {
	StatusCode int
	Message    string
}

func (e *RESTError) Error() string {
	return fmt.Sprintf("dloip: the server answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// GRPCStatus is the gRPC status of the same meaning.
func (e *RESTError) GRPCStatus() *status.Status {
	code := codes.Internal
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		code = codes.InvalidArgument
	case http.StatusUnauthorized:
		code = codes.Unauthenticated
	case http.StatusForbidden:
		code = codes.PermissionDenied
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		code = codes.NotFound
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		code = codes.ResourceExhausted
	case http.StatusNotImplemented:
		code = codes.Unimplemented
	case http.StatusServiceUnavailable:
		code = codes.Unavailable
	case http.StatusGatewayTimeout:
		code = codes.DeadlineExceeded
	}
	return status.New(code, e.Error())
}

// restErrorBytes bounds what is read of an error's body.
const restErrorBytes = 64 << 10

// errorOf reads an answer of an error.
func errorOf(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, restErrorBytes))
	var e struct {
		Error *string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		msg = *e.Error
	} else if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	return &RESTError{StatusCode: resp.StatusCode, Message: msg}
}

// get does a GET of path and decodes its JSON answer into v (nil: the
// body is not read). A non-200 answer is a *RESTError.
func (c *RESTClient) get(ctx context.Context, call, path string, v any) error {
	if err := c.errIfClosed(call); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("dloip: %s: %w", call, err)
	}
	req.Header = c.header.Clone()
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("dloip: %s: %w", call, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.opts.MaxMessageBytes)+1))
	if err != nil {
		return fmt.Errorf("dloip: %s: %w", call, err)
	}
	if len(b) > c.opts.MaxMessageBytes {
		return fmt.Errorf("dloip: %s: %w: an answer beyond MaxMessageBytes (%d)", call, ErrLimit, c.opts.MaxMessageBytes)
	}
	if v == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("dloip: %s: %w: %v", call, ErrInvalid, err)
	}
	return nil
}

// health reads a health or readiness answer: 200 is true, unless its
// JSON says field is false (Triton and MLServer answer with no body).
func (c *RESTClient) health(ctx context.Context, call, path, field string) (bool, error) {
	var v map[string]any
	if err := c.get(ctx, call, path, &v); err != nil {
		return false, err
	}
	if b, ok := v[field].(bool); ok {
		return b, nil
	}
	return true, nil
}

// modelPath is the path of a model's endpoints.
func modelPath(model, version string) string {
	p := "/v2/models/" + url.PathEscape(model)
	if version != "" {
		p += "/versions/" + url.PathEscape(version)
	}
	return p
}

// ServerLive reports whether the server is live: an answer of 200. Any
// other answer is false, with the server's error (*RESTError).
func (c *RESTClient) ServerLive(ctx context.Context) (bool, error) {
	return c.health(ctx, "server live", "/v2/health/live", "live")
}

// ServerReady reports whether the server is ready for inference: an
// answer of 200. Any other answer is false, with the server's error
// (*RESTError): Triton and MLServer answer 400, kserve and a dloip
// Server 503.
func (c *RESTClient) ServerReady(ctx context.Context) (bool, error) {
	return c.health(ctx, "server ready", "/v2/health/ready", "ready")
}

// ModelReady reports whether a model (version "" for the server's
// choice) is ready for inference. An unknown model or version is false
// with the server's error (a *RESTError of 404 from a dloip Server and
// kserve, 400 from Triton).
func (c *RESTClient) ModelReady(ctx context.Context, model, version string) (bool, error) {
	return c.health(ctx, "model ready", modelPath(model, version)+"/ready", "ready")
}

// ServerMetadata asks the server its name, version and extensions.
func (c *RESTClient) ServerMetadata(ctx context.Context) (ServerMetadata, error) {
	var m restServerMeta
	if err := c.get(ctx, "server metadata", "/v2", &m); err != nil {
		return ServerMetadata{}, err
	}
	return ServerMetadata(m), nil
}

// ModelMetadata asks the server about a model (version "" for the
// server's choice): its inputs and outputs, -1 for dimensions of
// variable size.
func (c *RESTClient) ModelMetadata(ctx context.Context, model, version string) (ModelMetadata, error) {
	var m restModelMeta
	if err := c.get(ctx, "model metadata", modelPath(model, version), &m); err != nil {
		return ModelMetadata{}, err
	}
	return m.metadata(), nil
}

// Infer runs req on the server. The request's JSON and each input's
// bytes (binary data by default, written from the producer's own
// memory; JSON values with WithJSON) go in one body; a tensor in a file
// mapping is copied first, under a fault guard, as Client.Infer does.
// Each output comes back sharing the 64-byte aligned buffer its binary
// data was read into, or a buffer its JSON values were decoded into
// (IsCopied). The response is checked as Client.Infer checks one: every
// size it declares against what it carries and MaxTensorBytes before
// anything is allocated (ErrInvalid, ErrDatatype, ErrShape, ErrLimit).
// An error answer is a *RESTError. Shared-memory inputs and outputs
// (Region) are the gRPC service's: here they fail with ErrInvalid.
func (c *RESTClient) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	if err := c.errIfClosed(fmt.Sprintf("infer %q", req.Model)); err != nil {
		return nil, err
	}
	fail := func(err error) (*InferResponse, error) { return nil, fmt.Errorf("dloip: infer %q: %w", req.Model, err) }
	held := make([]taken, 0, len(req.Inputs))
	release := func() { closeAll(held) }
	ts := make([]restTensorOut, 0, len(req.Inputs))
	seen := map[string]bool{}
	for _, in := range req.Inputs {
		if in.Name == "" || seen[in.Name] {
			release()
			return nil, &dlpack.FieldError{Field: "input name", Value: fmt.Sprintf("%q", in.Name), Err: ErrInvalid, Why: "empty or given twice"}
		}
		seen[in.Name] = true
		if in.Region != "" {
			release()
			return fail(restNoShm("input", in.Name))
		}
		t, err := take("input", in.Name, in.Tensor)
		if err != nil {
			release()
			return fail(err)
		}
		held = append(held, t)
		if t.mapped && len(t.data) > 0 {
			b := make([]byte, len(t.data))
			err := fault.Guard(uintptr(unsafe.Pointer(unsafe.SliceData(t.data))), uintptr(len(t.data)), func() error { copy(b, t.data); return nil })
			if fe, ok := err.(*fault.Error); ok {
				release()
				return fail(&dlpack.FieldError{Field: fmt.Sprintf("input %q: data", in.Name), Value: fmt.Sprintf("byte %d of %d", fe.Offset, len(t.data)), Err: ErrTruncated,
					Why: "the tensor's file was cut short while mapped; the lost pages cannot be read"})
			}
			t.data = b
		}
		ts = append(ts, restTensorOut{name: in.Name, params: in.Parameters, taken: t, binary: !c.json})
	}
	params := req.Parameters
	if !c.json && len(req.Outputs) == 0 {
		if _, set := params["binary_data_output"]; !set {
			params = make(Parameters, len(req.Parameters)+1)
			for k, v := range req.Parameters {
				params[k] = v
			}
			params["binary_data_output"] = true
		}
	}
	head := []byte{'{'}
	if req.ID != "" {
		head = append(appendJSONString(append(head, `"id":`...), []byte(req.ID)), ',')
	}
	if len(params) > 0 {
		var err error
		if head, err = appendParams(append(head, `"parameters":`...), "parameters", params); err != nil {
			release()
			return fail(err)
		}
		head = append(head, ',')
	}
	tail := []byte{}
	if len(req.Outputs) > 0 {
		tail = append(tail, `,"outputs":[`...)
		for i, o := range req.Outputs {
			if o.Region != "" {
				release()
				return fail(restNoShm("output", o.Name))
			}
			op := o.Parameters
			if _, set := op["binary_data"]; !set && !c.json {
				op = make(Parameters, len(o.Parameters)+1)
				for k, v := range o.Parameters {
					op[k] = v
				}
				op["binary_data"] = true
			}
			if i > 0 {
				tail = append(tail, ',')
			}
			tail = appendJSONString(append(tail, `{"name":`...), []byte(o.Name))
			if len(op) > 0 {
				var err error
				if tail, err = appendParams(append(tail, `,"parameters":`...), fmt.Sprintf("output %q: parameters", o.Name), op); err != nil {
					release()
					return fail(err)
				}
			}
			tail = append(tail, '}')
		}
		tail = append(tail, ']')
	}
	js, err := restStream(head, "input", "inputs", ts, append(tail, '}'))
	if err != nil {
		release()
		return fail(err)
	}
	body := &restBody{js: js, release: release}
	body.buf, body.jsDone = js.next(nil)
	for !c.json && !body.jsDone {
		// binary data: the JSON is small, and its length goes first
		body.buf, body.jsDone = js.next(body.buf)
	}
	length := int64(-1)
	if body.jsDone {
		length = int64(len(body.buf))
		for _, t := range ts {
			if t.binary {
				body.parts = append(body.parts, t.data)
				length += int64(len(t.data))
			}
		}
		if length > int64(c.opts.MaxMessageBytes) {
			release()
			return fail(&dlpack.FieldError{Field: "request", Value: fmt.Sprintf("%d bytes", length), Err: ErrLimit, Why: fmt.Sprintf("MaxMessageBytes is %d", c.opts.MaxMessageBytes)})
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+modelPath(req.Model, req.Version)+"/infer", body)
	if err != nil {
		body.Close()
		return fail(err)
	}
	hreq.Header = c.header.Clone()
	hreq.ContentLength = length
	if len(body.parts) > 0 || !c.json {
		hreq.Header.Set(HeaderInferenceContentLength, strconv.Itoa(len(body.buf)))
		hreq.Header.Set("Content-Type", "application/octet-stream")
	} else {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errorOf(resp)
	}
	lim := restLimits{maxBody: int64(c.opts.MaxMessageBytes), maxTensor: c.opts.MaxTensorBytes, alloc: c.opts.Allocator}
	in, err := readREST(http.MaxBytesReader(nil, resp.Body, lim.maxBody), resp.ContentLength, resp.Header.Get(HeaderInferenceContentLength), false, lim,
		func(msg *restMessage) error {
			var total int64
			for _, w := range msg.tensors {
				if err := checkDatatype(w.datatype); err != nil {
					return fmt.Errorf("output %q: %w", w.name, err)
				}
				n, err := minBytes(w.datatype, w.shape)
				if err != nil {
					return fmt.Errorf("output %q: %w", w.name, err)
				}
				if total += n; lim.maxTensor >= 0 && total > lim.maxTensor {
					return fmt.Errorf("output %q: %w", w.name, &dlpack.FieldError{Field: "shape", Value: w.shape,
						Err: ErrLimit, Why: fmt.Sprintf("the outputs declare %d bytes, and MaxTensorBytes is %d", total, lim.maxTensor)})
				}
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("dloip: infer %q: response: %w", req.Model, err)
	}
	outs, err := in.tensors()
	if err != nil {
		return nil, fmt.Errorf("dloip: infer %q: response: %w", req.Model, err)
	}
	return &InferResponse{Model: in.msg.model, Version: in.msg.version, ID: in.msg.id, Parameters: in.msg.params, Outputs: outs}, nil
}

// restBody is a request's body: its JSON, a piece at a time, then the
// binary data of its inputs from their own memory. Close, which the
// HTTP transport calls once it is done with the body (maybe after the
// call has returned), releases the inputs.
type restBody struct {
	mu      sync.Mutex
	js      *jsonStream
	buf     []byte // the JSON not yet read
	jsDone  bool
	parts   [][]byte
	release func()
	closed  bool
}

func (b *restBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, dlpack.ErrClosed
	}
	for len(b.buf) == 0 && !b.jsDone {
		b.buf, b.jsDone = b.js.next(b.buf[:0])
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	for len(b.parts) > 0 && len(b.parts[0]) == 0 {
		b.parts = b.parts[1:]
	}
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.parts[0])
	b.parts[0] = b.parts[0][n:]
	return n, nil
}

// WriteTo writes what is left of the body to w, the binary data from
// the inputs' memory as it is.
func (b *restBody) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return total, dlpack.ErrClosed
		}
		for len(b.buf) == 0 && !b.jsDone {
			b.buf, b.jsDone = b.js.next(b.buf[:0])
		}
		var p []byte
		json := len(b.buf) > 0
		switch {
		case json:
			p = b.buf
		case len(b.parts) > 0:
			p, b.parts = b.parts[0], b.parts[1:]
		default:
			b.mu.Unlock()
			return total, nil
		}
		n, err := w.Write(p)
		if json {
			b.buf = p[:0] // the next piece goes into the same buffer
		}
		b.mu.Unlock()
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

func (b *restBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.release()
	}
	return nil
}
