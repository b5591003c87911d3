package dloip

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
)

// Client calls a model server that speaks the Open Inference Protocol
// over gRPC: a dloip Server, Triton, KServe, MLServer, ... Its methods
// may be called from many goroutines at once.
type Client struct {
	conn   *dlgrpc.Conn
	opts   dlgrpc.ClientOptions
	pc     pb.GRPCInferenceServiceClient
	closed atomic.Bool
	// regions are the Regions registered through this client
	// (RegisterRegion): an input in one goes by reference.
	regionsMu sync.RWMutex
	regions   map[string]*Region
}

// Dial makes a Client of the server at addr ("host:port"); the
// connection is made on first use.
func Dial(addr string, opts ClientOptions) (*Client, error) {
	conn, err := dlgrpc.Dial("dloip", addr, opts.shared(), DefaultMaxMessageBytes)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, opts: conn.Options(), pc: pb.NewGRPCInferenceServiceClient(conn)}, nil
}

// Close closes the connection. Calling it again does nothing and returns
// nil; a call made after Close fails with an error wrapping
// dlpack.ErrClosed.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	return c.conn.Close()
}

func (c *Client) errIfClosed(call string) error {
	if c.closed.Load() {
		return fmt.Errorf("dloip: %s: %w: the client is closed", call, dlpack.ErrClosed)
	}
	return nil
}

func (c *Client) ctx(ctx context.Context) context.Context { return c.conn.Outgoing(ctx) }

// ServerLive reports whether the server is live.
func (c *Client) ServerLive(ctx context.Context) (bool, error) {
	if err := c.errIfClosed("server live"); err != nil {
		return false, err
	}
	r, err := c.pc.ServerLive(c.ctx(ctx), &pb.ServerLiveRequest{})
	return r.GetLive(), err
}

// ServerReady reports whether the server is ready for inference.
func (c *Client) ServerReady(ctx context.Context) (bool, error) {
	if err := c.errIfClosed("server ready"); err != nil {
		return false, err
	}
	r, err := c.pc.ServerReady(c.ctx(ctx), &pb.ServerReadyRequest{})
	return r.GetReady(), err
}

// ModelReady reports whether a model (version "" for the server's
// choice) is ready for inference. A server answers an unknown model or
// version with codes.NotFound (a dloip Server and kserve do; Triton
// answers false), which ModelReady returns as its error.
func (c *Client) ModelReady(ctx context.Context, model, version string) (bool, error) {
	if err := c.errIfClosed("model ready"); err != nil {
		return false, err
	}
	r, err := c.pc.ModelReady(c.ctx(ctx), &pb.ModelReadyRequest{Name: model, Version: version})
	return r.GetReady(), err
}

// ServerMetadata asks the server its name, version and extensions.
func (c *Client) ServerMetadata(ctx context.Context) (ServerMetadata, error) {
	if err := c.errIfClosed("server metadata"); err != nil {
		return ServerMetadata{}, err
	}
	r, err := c.pc.ServerMetadata(c.ctx(ctx), &pb.ServerMetadataRequest{})
	if err != nil {
		return ServerMetadata{}, err
	}
	return ServerMetadata{Name: r.GetName(), Version: r.GetVersion(), Extensions: r.GetExtensions()}, nil
}

// ModelMetadata asks the server about a model (version "" for the
// server's choice): its inputs and outputs, -1 for dimensions of
// variable size.
func (c *Client) ModelMetadata(ctx context.Context, model, version string) (ModelMetadata, error) {
	if err := c.errIfClosed("model metadata"); err != nil {
		return ModelMetadata{}, err
	}
	r, err := c.pc.ModelMetadata(c.ctx(ctx), &pb.ModelMetadataRequest{Name: model, Version: version})
	if err != nil {
		return ModelMetadata{}, err
	}
	return ModelMetadata{Name: r.GetName(), Versions: r.GetVersions(), Platform: r.GetPlatform(),
		Inputs: tensorMetaOf(r.GetInputs()), Outputs: tensorMetaOf(r.GetOutputs())}, nil
}

// InferRequest is an inference call: the model (and version, "" for the
// server's choice), an optional request id and parameters, the inputs and
// the outputs asked for (all the model has when empty).
type InferRequest struct {
	Model      string
	Version    string
	ID         string
	Parameters Parameters
	Inputs     []Input
	Outputs    []RequestedOutput
}

// RequestedOutput names an output asked for, with its parameters.
//
// With Region set, the server writes the output into that registered
// shared-memory region, Offset bytes into it, and Memory is the caller's
// own mapping of those bytes (its length the byte size the server may
// write): the output Tensor then shares Memory, and nothing of it
// travels in the response.
type RequestedOutput struct {
	Name       string
	Parameters Parameters
	Region     string
	Offset     uint64
	Memory     []byte
}

// InferResponse is the answer to an Infer, or one of the responses to a
// request on a stream: the model and version that ran, the request id,
// parameters and the outputs. Final marks the last response to its
// request: always that of an Infer; on a stream, the one whose
// parameter "triton_final_response" (ParamFinal) is true. Close it when
// done.
type InferResponse struct {
	Model      string
	Version    string
	ID         string
	Parameters Parameters
	Outputs    []*Tensor
	Final      bool
}

// Output is the output named name, nil when there is none.
func (r *InferResponse) Output(name string) *Tensor {
	for _, t := range r.Outputs {
		if t.name == name {
			return t
		}
	}
	return nil
}

// Close closes every output (exports already made stay valid).
func (r *InferResponse) Close() error {
	for _, t := range r.Outputs {
		t.Close()
	}
	return nil
}

// Infer runs req on the server. Each input goes out from its producer's
// own memory, with no copy before gRPC's writer fills the socket: the
// codec hands the bytes to gRPC as they are and holds the producer's
// tensor until gRPC has written them (a non-compact tensor is made
// compact once, by a copy, first). Each output comes back sharing the
// 64-byte aligned buffer the codec copied it into, once, out of gRPC's
// frame buffers. A response that breaks the protocol (a byte length that
// is not the shape times the element size, an unknown datatype, BYTES,
// raw contents for only some outputs) fails with an error wrapping
// ErrInvalid or ErrDatatype, and nothing is held.
func (c *Client) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	if err := c.errIfClosed(fmt.Sprintf("infer %q", req.Model)); err != nil {
		return nil, err
	}
	msg, raws, mapped, held, err := c.message(req)
	if err != nil {
		return nil, err
	}
	h := c.conn.NewHold(func() { closeAll(held) })
	defer h.Drop()
	in := newInInfer(new(pb.ModelInferResponse), fieldRawOutput, c.opts.Allocator, c.opts.MaxTensorBytes)
	out := newOutInfer(msg, fieldRawInput, raws, mapped, h)
	if err := c.conn.Invoke(c.ctx(ctx), methodInfer, out, in); err != nil {
		if out.err != nil {
			return nil, fmt.Errorf("dloip: infer %q: input: %w", req.Model, out.err)
		}
		return nil, err
	}
	if in.err != nil {
		in.freeRest()
		return nil, fmt.Errorf("dloip: infer %q: response: %w", req.Model, in.err)
	}
	resp, err := c.responseOf(req, in.msg.(*pb.ModelInferResponse), in)
	if err != nil {
		return nil, err
	}
	resp.Final = true
	return resp, nil
}

// message makes the ModelInferRequest of req, its raw contents each an
// input's own memory (mapped[i]: raws[i] lies in a file mapping), and
// takes the inputs, which the caller releases (closeAll) once they are
// sent; on error nothing is held.
func (c *Client) message(req *InferRequest) (msg *pb.ModelInferRequest, raws [][]byte, mapped []bool, held []taken, err error) {
	msg = &pb.ModelInferRequest{ModelName: req.Model, ModelVersion: req.Version, Id: req.ID}
	if msg.Parameters, err = req.Parameters.toPB("parameters"); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("dloip: infer %q: %w", req.Model, err)
	}
	held = make([]taken, 0, len(req.Inputs))
	raws = make([][]byte, 0, len(req.Inputs))
	fail := func(err error) (*pb.ModelInferRequest, [][]byte, []bool, []taken, error) {
		closeAll(held)
		return nil, nil, nil, nil, err
	}
	seen := map[string]bool{}
	for _, in := range req.Inputs {
		if in.Name == "" || seen[in.Name] {
			return fail(&dlpack.FieldError{Field: "input name", Value: fmt.Sprintf("%q", in.Name), Err: ErrInvalid, Why: "empty or given twice"})
		}
		seen[in.Name] = true
		params, err := in.Parameters.toPB(fmt.Sprintf("input %q: parameters", in.Name))
		if err != nil {
			return fail(fmt.Errorf("dloip: infer %q: %w", req.Model, err))
		}
		t, err := take("input", in.Name, in.Tensor)
		if err != nil {
			return fail(fmt.Errorf("dloip: infer %q: %w", req.Model, err))
		}
		held = append(held, t)
		if in.Region == "" && len(t.data) > 0 {
			// a tensor in a registered Region goes by reference
			if name, off, ok := c.regionOf(t.data); ok {
				in.Region, in.Offset = name, uint64(off)
			}
		}
		if in.Region != "" {
			params = withRegion(params, in.Region, in.Offset, uint64(len(t.data)))
		} else {
			raws = append(raws, t.data)
			mapped = append(mapped, t.mapped)
		}
		msg.Inputs = append(msg.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: t.datatype, Shape: t.shape, Parameters: params})
	}
	for _, o := range req.Outputs {
		params, err := o.Parameters.toPB(fmt.Sprintf("output %q: parameters", o.Name))
		if err != nil {
			return fail(fmt.Errorf("dloip: infer %q: %w", req.Model, err))
		}
		if o.Region != "" {
			params = withRegion(params, o.Region, o.Offset, uint64(len(o.Memory)))
		}
		msg.Outputs = append(msg.Outputs, &pb.ModelInferRequest_InferRequestedOutputTensor{Name: o.Name, Parameters: params})
	}
	return msg, raws, mapped, held, nil
}

// withRegion adds the shared-memory parameters of a tensor.
func withRegion(params map[string]*pb.InferParameter, region string, off, n uint64) map[string]*pb.InferParameter {
	if params == nil {
		params = map[string]*pb.InferParameter{}
	}
	params[ParamRegion] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: region}}
	params[ParamByteSize] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(n)}}
	params[ParamOffset] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(off)}}
	return params
}

// responseOf checks and converts r, a received response whose raw
// contents in holds: every size it declares is checked against what it
// carries, and against MaxTensorBytes, before anything is allocated.
func (c *Client) responseOf(req *InferRequest, r *pb.ModelInferResponse, in *inInfer) (*InferResponse, error) {
	defer in.freeRest()
	model := req.Model
	ws := make([]wireTensor, len(r.Outputs))
	for i, o := range r.Outputs {
		ws[i] = wireTensor{name: o.GetName(), datatype: o.GetDatatype(), shape: o.GetShape(), params: o.GetParameters(), contents: o.GetContents()}
	}
	asked := func(name string) *RequestedOutput {
		for i := range req.Outputs {
			if req.Outputs[i].Name == name && req.Outputs[i].Region != "" {
				return &req.Outputs[i]
			}
		}
		return nil
	}
	var total int64
	for _, w := range ws {
		if err := checkDatatype(w.datatype); err != nil {
			return nil, fmt.Errorf("dloip: infer %q: response: output %q: %w", model, w.name, err)
		}
		n, err := minBytes(w.datatype, w.shape)
		if err != nil {
			return nil, fmt.Errorf("dloip: infer %q: response: output %q: %w", model, w.name, err)
		}
		if total += n; c.opts.MaxTensorBytes >= 0 && total > c.opts.MaxTensorBytes {
			return nil, fmt.Errorf("dloip: infer %q: response: output %q: %w", model, w.name, &dlpack.FieldError{Field: "shape", Value: w.shape,
				Err: ErrLimit, Why: fmt.Sprintf("the outputs declare %d bytes, and MaxTensorBytes is %d", total, c.opts.MaxTensorBytes)})
		}
	}
	shm := &shmPlacer{
		is: func(w wireTensor) bool { return asked(w.name) != nil },
		make: func(w wireTensor, emptyRaw bool) (*Tensor, error) {
			o := asked(w.name)
			// The server must say that it wrote the output there: Triton
			// answers an empty raw entry for it, a dloip server that and
			// the output's region parameter. A server without the
			// extension (kserve, MLServer) answers OK and leaves the
			// region as it was, which must not pass for the output.
			if p, ok := w.params[ParamRegion]; !emptyRaw && (!ok || p.GetStringParam() != o.Region) {
				return nil, &dlpack.FieldError{Field: fmt.Sprintf("output %q", w.name), Value: o.Region, Err: ErrInvalid,
					Why: "the output was asked for in this shared-memory region, and the response does not say that the server wrote it there (no empty raw entry, no region parameter): the server may not have the shared-memory extension"}
			}
			if w.datatype == BYTES {
				return nil, &dlpack.FieldError{Field: fmt.Sprintf("output %q: datatype", w.name), Value: BYTES, Err: ErrDatatype,
					Why: "a BYTES output asked for in shared memory: its byte size is not its shape's, and the response does not give it"}
			}
			dt, err := ParseDatatype(w.datatype)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", w.name, err)
			}
			n, err := byteSize(dt, w.shape)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", w.name, err)
			}
			if n > int64(len(o.Memory)) {
				return nil, &dlpack.FieldError{Field: fmt.Sprintf("output %q: shape", w.name), Value: w.shape, Err: ErrInvalid,
					Why: fmt.Sprintf("%s %v needs %d bytes; the region's span has %d", w.datatype, w.shape, n, len(o.Memory))}
			}
			t, err := newTensor("output", w.name, w.datatype, w.shape, o.Memory[:n], false, nil)
			if err != nil {
				return nil, err
			}
			t.params = paramsOf(w.params)
			return t, nil
		},
		rawToo: true,
	}
	ts, err := place("output", "raw_output_contents", ws, in, shm)
	if err != nil {
		return nil, fmt.Errorf("dloip: infer %q: response: %w", model, err)
	}
	return &InferResponse{Model: r.GetModelName(), Version: r.GetModelVersion(), ID: r.GetId(),
		Parameters: paramsOf(r.GetParameters()), Outputs: ts}, nil
}

// RegionStatus describes a registered shared-memory region.
type RegionStatus struct {
	Name     string
	Key      string
	Offset   uint64
	ByteSize uint64
}

// RegisterSystemSharedMemory registers with the server the region name:
// byteSize bytes at offset of the POSIX shared-memory object key (the
// name shm_open takes, a file under /dev/shm on Linux; a tensorfile
// created there, for one). Inputs and outputs then name it
// (Input.Region, RequestedOutput.Region).
func (c *Client) RegisterSystemSharedMemory(ctx context.Context, name, key string, offset, byteSize uint64) error {
	if err := c.errIfClosed("register shared memory"); err != nil {
		return err
	}
	_, err := c.pc.SystemSharedMemoryRegister(c.ctx(ctx), &pb.SystemSharedMemoryRegisterRequest{Name: name, Key: key, Offset: offset, ByteSize: byteSize})
	return err
}

// UnregisterSystemSharedMemory unregisters the region name ("" for all).
func (c *Client) UnregisterSystemSharedMemory(ctx context.Context, name string) error {
	if err := c.errIfClosed("unregister shared memory"); err != nil {
		return err
	}
	_, err := c.pc.SystemSharedMemoryUnregister(c.ctx(ctx), &pb.SystemSharedMemoryUnregisterRequest{Name: name})
	return err
}

// SystemSharedMemoryStatus lists the registered regions (name "" for
// all), sorted by name.
func (c *Client) SystemSharedMemoryStatus(ctx context.Context, name string) ([]RegionStatus, error) {
	if err := c.errIfClosed("shared memory status"); err != nil {
		return nil, err
	}
	r, err := c.pc.SystemSharedMemoryStatus(c.ctx(ctx), &pb.SystemSharedMemoryStatusRequest{Name: name})
	if err != nil {
		return nil, err
	}
	var out []RegionStatus
	for _, s := range r.GetRegions() {
		out = append(out, RegionStatus{Name: s.GetName(), Key: s.GetKey(), Offset: s.GetOffset(), ByteSize: s.GetByteSize()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
