package dloip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// hostileRequests are ModelInfer requests, as bytes on the wire, that
// lie to a server whose model "m" takes "a" (FP32, any length): each
// with the status it must get and words its message must have.
func hostileRequests() []struct {
	name  string
	wire  []byte
	code  codes.Code
	parts []string
} {
	req := func(in *pb.ModelInferRequest_InferInputTensor, raw ...[]byte) []byte {
		b, _ := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in}, RawInputContents: raw})
		return b
	}
	head, _ := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "FP32", 2)}})
	return []struct {
		name  string
		wire  []byte
		code  codes.Code
		parts []string
	}{
		// a shape of 2^28 elements (1 GiB) and no contents: counted,
		// not allocated
		{"huge shape, no contents", req(in("a", "FP32", 1<<28)), codes.InvalidArgument, []string{`input "a": contents.fp32_contents = 0 values`, "268435456 elements"}},
		{"huge shape, no contents, FP16", req(in("a", "FP16", 1<<28)), codes.InvalidArgument, []string{`input "a"`}},
		{"shape beyond MaxTensorBytes", req(in("a", "FP32", 1<<31)), codes.ResourceExhausted, []string{`input "a"`, "MaxTensorBytes"}},
		{"overflowing shape", req(in("a", "FP32", 1<<40, 1<<40)), codes.InvalidArgument, []string{`input "a"`, "overflows"}},
		{"lying length", req(in("a", "FP32", 2), make([]byte, 7)), codes.InvalidArgument, []string{`input "a": byte length = 7`}},
		{"lying datatype", req(in("a", "FP64", 2), make([]byte, 16)), codes.InvalidArgument, []string{`input "a": datatype = FP64`}},
		{"unknown datatype", req(in("a", "FP8", 2), make([]byte, 2)), codes.InvalidArgument, []string{`input "a"`, "FP8"}},
		{"too many dimensions", req(in("a", "FP32", ones(dlpack.MaxNDim+1)...)), codes.InvalidArgument, []string{`input "a"`, "dimensions"}},
		{"overlong varint", append(append([]byte{}, head...), append(protowire.AppendTag(nil, fieldRawInput, protowire.BytesType), dlgrpctest.Overlong...)...),
			codes.InvalidArgument, []string{"malformed", "varint"}},
		{"tenth varint byte above 1", append(append([]byte{}, head...), append(protowire.AppendTag(nil, 99, protowire.VarintType), dlgrpctest.TenthAboveOne...)...),
			codes.InvalidArgument, []string{"malformed", "varint"}},
		{"length beyond the message", append(append([]byte{}, head...), append(protowire.AppendTag(nil, fieldRawInput, protowire.BytesType), protowire.AppendVarint(nil, 1<<30)...)...),
			codes.InvalidArgument, []string{"malformed", "1073741824 bytes"}},
		{"field number 0", append(append([]byte{}, head...), 0x02, 0x00), codes.InvalidArgument, []string{"malformed", "field number 0"}},
		{"unclosed group", append(append([]byte{}, head...), protowire.AppendTag(nil, 99, protowire.StartGroupType)...), codes.InvalidArgument, []string{"malformed"}},
	}
}

// A server with the zero Options gives every hostile request a clear
// status and serves on, a request that declares a huge tensor without
// sending it included: nothing of the declared size is allocated.
func TestHostileRequestsZeroOptions(t *testing.T) {
	_, addr := serve(t, Options{}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}),
		echoModel("h", TensorMetadata{Name: "a", Datatype: "FP16", Shape: []int64{-1}}))
	conn := dlgrpctest.Dial(t, addr)
	good, _ := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{in("a", "FP32", 2)}, RawInputContents: [][]byte{make([]byte, 8)}})
	for _, tc := range hostileRequests() {
		_, err := dlgrpctest.Unary(ctxT(t), conn, methodInfer, tc.wire)
		wantStatus(t, err, tc.code, tc.parts...)
		t.Logf("%s: %v", tc.name, err)
		if _, err := dlgrpctest.Unary(ctxT(t), conn, methodInfer, good); err != nil {
			t.Fatalf("after %s: %v", tc.name, err)
		}
	}
}

// hostileResponses are ModelInfer responses, as bytes on the wire, that
// lie to a client: each with the error its Infer must wrap and words
// it must have.
func hostileResponses() []struct {
	name  string
	wire  []byte
	is    error
	parts []string
} {
	out := func(name, datatype string, shape ...int64) *pb.ModelInferResponse_InferOutputTensor {
		return &pb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: datatype, Shape: shape}
	}
	resp := func(o *pb.ModelInferResponse_InferOutputTensor, raw ...[]byte) []byte {
		b, _ := proto.Marshal(&pb.ModelInferResponse{ModelName: "m", Outputs: []*pb.ModelInferResponse_InferOutputTensor{o}, RawOutputContents: raw})
		return b
	}
	head, _ := proto.Marshal(&pb.ModelInferResponse{ModelName: "m", Outputs: []*pb.ModelInferResponse_InferOutputTensor{out("y", "FP32", 2)}})
	return []struct {
		name  string
		wire  []byte
		is    error
		parts []string
	}{
		{"huge shape, no contents", resp(out("y", "FP32", 1<<28)), ErrInvalid, []string{`output "y": contents.fp32_contents = 0 values`}},
		{"shape beyond MaxTensorBytes", resp(out("y", "FP32", 1<<31)), ErrLimit, []string{`output "y"`, "MaxTensorBytes"}},
		{"overflowing shape", resp(out("y", "FP32", 1<<40, 1<<40)), ErrShape, []string{`output "y"`, "overflows"}},
		{"lying length", resp(out("y", "FP32", 2), make([]byte, 7)), ErrInvalid, []string{`output "y": byte length = 7`}},
		{"unknown datatype", resp(out("y", "FP8", 2), make([]byte, 2)), ErrDatatype, []string{`output "y"`, "FP8"}},
		{"overlong varint", append(append([]byte{}, head...), append(protowire.AppendTag(nil, fieldRawOutput, protowire.BytesType), dlgrpctest.Overlong...)...),
			dlgrpc.ErrMalformed, []string{"varint"}},
		{"tenth varint byte above 1", append(append([]byte{}, head...), append(protowire.AppendTag(nil, 99, protowire.VarintType), dlgrpctest.TenthAboveOne...)...),
			dlgrpc.ErrMalformed, []string{"varint"}},
		{"length beyond the message", append(append([]byte{}, head...), append(protowire.AppendTag(nil, fieldRawOutput, protowire.BytesType), protowire.AppendVarint(nil, 1<<30)...)...),
			dlgrpc.ErrMalformed, []string{"1073741824 bytes"}},
	}
}

// A client with the zero ClientOptions fails every hostile response with
// an error wrapping the sentinel that says why, allocates nothing of a
// size only declared, and holds nothing afterwards.
func TestHostileServerZeroOptions(t *testing.T) {
	cases := hostileResponses()
	var next atomic.Int32
	addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) {
		return [][]byte{cases[next.Load()].wire}, nil
	})
	alloc := &countingAllocator{}
	c := dial(t, addr, ClientOptions{Allocator: alloc})
	for i, tc := range cases {
		next.Store(int32(i))
		_, err := c.Infer(ctxT(t), &InferRequest{Model: "m"})
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q lacks %q", tc.name, err, p)
			}
		}
		if n := alloc.out.Load(); n != 0 {
			t.Fatalf("%s: %d bytes of received bodies held", tc.name, n)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// countingAllocator is the default allocator, counting what it has
// handed out and not yet got back.
type countingAllocator struct{ out atomic.Int64 }

func (a *countingAllocator) Allocate(n int) []byte {
	a.out.Add(int64(n))
	return dlgrpc.DefaultAllocator.Allocate(n)
}

func (a *countingAllocator) Reallocate(n int, b []byte) []byte {
	a.out.Add(int64(n - len(b)))
	return dlgrpc.DefaultAllocator.Reallocate(n, b)
}

func (a *countingAllocator) Free(b []byte) {
	a.out.Add(-int64(len(b)))
	dlgrpc.DefaultAllocator.Free(b)
}

// A server that skips writing a region (kserve and MLServer answer such
// requests OK, sending the output's bytes or nothing): the client fails
// the Infer naming the output, instead of handing back the region's old
// bytes as the output.
func TestRegionNotWritten(t *testing.T) {
	key, off, _, _ := shmNPYOrSkip(t, dlpack.Float32, 2)
	mem := make([]byte, 8)
	for _, tc := range []struct {
		name string
		resp *pb.ModelInferResponse
	}{
		{"bytes sent instead", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2}}},
			RawOutputContents: [][]byte{make([]byte, 8)}}},
		{"nothing said", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2}}}}},
		{"typed contents", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2},
			Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 2}}}}}},
		{"another region named", &pb.ModelInferResponse{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2},
			Parameters: map[string]*pb.InferParameter{ParamRegion: {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "other"}}}}}}},
	} {
		wire, _ := proto.Marshal(tc.resp)
		addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) { return [][]byte{wire}, nil })
		c := dial(t, addr, ClientOptions{})
		_ = key
		_, err := c.Infer(ctxT(t), &InferRequest{Model: "m", Outputs: []RequestedOutput{{Name: "y", Region: "r", Offset: off, Memory: mem}}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `output "y"`) {
			t.Fatalf("%s: %v, want ErrInvalid naming the output", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// Triton's answer (an empty raw entry) and dloip's (the region
	// parameter) say it was written.
	for _, resp := range []*pb.ModelInferResponse{
		{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2}}}, RawOutputContents: [][]byte{{}}},
		{Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{2},
			Parameters: map[string]*pb.InferParameter{ParamRegion: {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}}}}}},
	} {
		wire, _ := proto.Marshal(resp)
		addr := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) { return [][]byte{wire}, nil })
		r, err := dial(t, addr, ClientOptions{}).Infer(ctxT(t), &InferRequest{Model: "m", Outputs: []RequestedOutput{{Name: "y", Region: "r", Memory: mem}}})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}

// shmNPYOrSkip is shmNPY where /dev/shm exists.
func shmNPYOrSkip(t *testing.T, dt dlpack.DataType, shape ...int64) (string, uint64, []byte, dlpack.Producer) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skip("no /dev/shm")
	}
	key, off, data, tensor := shmNPY(t, dt, shape...)
	return key, off, data, tensor
}

// User code never ends the process: a model, an Authenticate or Allow
// hook, an output's producer and an output's Release that panic fail
// that call alone (codes.Internal; nothing for the Release, which runs
// once the answer is made) and are reported to the Logger; the server
// serves on. (A producer's owner that panics when released is the core's
// to swallow: it may run under a C deleter.)
func TestPanicsRecovered(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	meta := ModelMetadata{Name: "panics", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}
	var log strings.Builder
	var logMu atomic.Int32
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &log, n: &logMu}, nil))
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Float32, 4)}}
	_, addr := serve(t, Options{Logger: logger},
		ModelFunc(meta, func(context.Context, *Request) ([]Output, error) { panic("the model panics") }),
		ModelFunc(ModelMetadata{Name: "release", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(_ context.Context, req *Request) ([]Output, error) {
			return []Output{{Name: "x", Tensor: req.Inputs[0], Release: func() { panic("Release panics") }}}, nil
		}),
		ModelFunc(ModelMetadata{Name: "producer", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(_ context.Context, req *Request) ([]Output, error) {
			return []Output{{Name: "x", Tensor: panickyTensor{newRaw(t, dlpack.Float32, 4)}}}, nil
		}),
		echoModel("echo", x))
	c := dial(t, addr, ClientOptions{})
	_, err := c.Infer(ctxT(t), &InferRequest{Model: "panics", Inputs: in})
	wantStatus(t, err, codes.Internal, `model "panics"`, "the model panics")
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "producer", Inputs: in})
	wantStatus(t, err, codes.Internal, `output "x"`, "the producer panics")
	for _, m := range []string{"release", "echo"} {
		r, err := c.Infer(ctxT(t), &InferRequest{Model: m, Inputs: in})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		r.Close()
	}
	for _, want := range []string{"the model panics", "Release panics", "the producer panics"} {
		if !logged(&log, &logMu, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log.String())
		}
	}
	for _, hooks := range []Options{
		{Logger: quiet, Authenticate: func(context.Context, dlgrpc.AuthRequest) (string, error) { panic("Authenticate panics") }},
		{Logger: quiet, Allow: func(string, dlgrpc.Op, string) bool { panic("Allow panics") }},
	} {
		_, addr := serve(t, hooks, echoModel("echo", x))
		_, err := dial(t, addr, ClientOptions{}).Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
		wantStatus(t, err, codes.Internal, "panics")
		t.Logf("%v", err)
		if live, err := dial(t, addr, ClientOptions{}).ServerLive(ctxT(t)); hooks.Allow != nil && (!live || err != nil) {
			t.Fatalf("after a panicking hook: %v %v", live, err)
		}
	}
}

func logged(log *strings.Builder, n *atomic.Int32, want string) bool {
	for !n.CompareAndSwap(0, 1) {
	}
	defer n.Store(0)
	return strings.Contains(log.String(), want)
}

func ones(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

type lockedWriter struct {
	w *strings.Builder
	n *atomic.Int32
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	for !l.n.CompareAndSwap(0, 1) {
	}
	defer l.n.Store(0)
	return l.w.Write(p)
}

// panickyTensor is a producer that panics when asked for its tensor.
type panickyTensor struct{ *testTensor }

func (panickyTensor) DescribeTensor(*dlpack.Description) error      { panic("the producer panics") }
func (panickyTensor) DLPack(dlpack.Request) (dlpack.Managed, error) { panic("the producer panics") }

// A shared-memory key is a regular file directly in /dev/shm, owned by
// the server's user and writable by no one else: a symbolic link (to a
// file anywhere), a FIFO (which would block an open), a directory, a
// path, another user's file and one others may write are refused with
// codes.InvalidArgument saying why, and nothing is registered.
func TestRegionKeys(t *testing.T) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skip("no /dev/shm")
	}
	_, addr := serve(t, Options{})
	c := dial(t, addr, ClientOptions{})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	name := func(kind string) string { return fmt.Sprintf("dloip-key-%s-%d", kind, os.Getpid()) }
	mk := func(kind string, make func(path string) error) string {
		path := filepath.Join(shmDir, name(kind))
		os.Remove(path)
		if err := make(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		return name(kind)
	}
	file := func(mode os.FileMode) func(string) error {
		return func(p string) error {
			if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
				return err
			}
			return os.Chmod(p, mode)
		}
	}
	cases := map[string]string{
		mk("link", func(p string) error { return os.Symlink(secret, p) }):    "symbolic link",
		mk("fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }): "not a regular file",
		mk("dir", func(p string) error { return os.Mkdir(p, 0o700) }):        "not a regular file",
		mk("groupw", file(0o620)):                  "lets others write",
		mk("otherw", file(0o606)):                  "lets others write",
		"../../" + strings.TrimPrefix(secret, "/"): "one name",
		"a/b":           "one name",
		"..":            "one name",
		"":              "one name",
		name("missing"): "no such file",
	}
	if os.Geteuid() == 0 {
		cases[mk("other-user", func(p string) error {
			if err := file(0o600)(p); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		})] = "owned by user 65534"
	} else {
		t.Log("not root: another user's file is not tried")
	}
	for key, why := range cases {
		err := c.RegisterSystemSharedMemory(ctxT(t), "r", key, 0, 16)
		wantStatus(t, err, codes.InvalidArgument, why)
		t.Logf("%q: %v", key, err)
	}
	if st, err := c.SystemSharedMemoryStatus(ctxT(t), ""); err != nil || len(st) != 0 {
		t.Fatalf("registered: %v %v", st, err)
	}
}

// MaxConcurrentCalls bounds the calls a server runs at once: one beyond
// it is refused at once with codes.ResourceExhausted, before anything of
// it is read, and every place is given back when its call ends,
// whichever way.
func TestMaxConcurrentCalls(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	block := ModelFunc(ModelMetadata{Name: "block", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(ctx context.Context, req *Request) ([]Output, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
	})
	_, addr := serve(t, Options{MaxConcurrentCalls: 2}, block, echoModel("echo", x))
	c := dial(t, addr, ClientOptions{})
	in := []Input{{Name: "x", Tensor: newRaw(t, dlpack.Float32, 4)}}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			r, err := c.Infer(context.Background(), &InferRequest{Model: "block", Inputs: in})
			if err == nil {
				r.Close()
			}
			errs <- err
		}()
	}
	<-started
	<-started
	_, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
	wantStatus(t, err, codes.ResourceExhausted, "MaxConcurrentCalls")
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// every place back, cancelled calls' too
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c.Infer(ctx, &InferRequest{Model: "echo", Inputs: in})
	}
	for range 10 {
		r, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}
