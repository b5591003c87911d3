package dloip

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// The streaming peers: tritonclient's start_stream and
// async_stream_infer against our Server, and our Client against a
// Python grpcio server of ModelStreamInfer written on tritonclient's own
// definitions (testdata/stream_server.py). make oip runs them.

// floodModel answers n (INT32 [1]) with n responses of 16 bytes (UINT8
// [16]), the last one final: the streaming benchmark's model.
func floodModel() StreamModel {
	y := &testTensor{dt: dlpack.Uint8, shape: []int64{16}, data: dlpack.AlignedSlice[byte](16), released: new(atomic.Int32)}
	for i := range y.data {
		y.data[i] = byte(i)
	}
	meta := ModelMetadata{Name: "flood", Inputs: []TensorMetadata{{Name: "n", Datatype: "INT32", Shape: []int64{1}}},
		Outputs: []TensorMetadata{{Name: "y", Datatype: "UINT8", Shape: []int64{16}}}}
	return StreamFunc(meta, func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		n := int(int32(binary.LittleEndian.Uint32(req.Inputs[0].Bytes())))
		for range n - 1 {
			if err := send([]Output{{Name: "y", Tensor: y}}); err != nil {
				return nil, err
			}
		}
		if n < 1 {
			return nil, nil
		}
		return []Output{{Name: "y", Tensor: y}}, nil
	})
}

// streamModels are the models the streaming peers call, on our server
// and on the Python one.
func streamModels() []StreamModel {
	var released atomic.Int32
	return []StreamModel{tokens("tokens", false, &released), tokens("last", true, &released), failsModel(), floodModel()}
}

// TestPeersTritonStream: tritonclient.grpc's start_stream and
// async_stream_infer against our Server (a bearer token on the stream):
// decoupled models that stream tokens (BYTES text and INT32 numbers),
// every final flag as Triton sends it, the empty final response only
// when asked, requests in flight together, error answers with the
// stream going on, a plain model on the stream (testdata/triton_stream.py
// checks).
func TestPeersTritonStream(t *testing.T) {
	py := peerPython(t)
	_, addr := serveStream(t, Options{Tokens: map[string]string{"peer-token": "peer"}}, streamModels(),
		echoModel("echo", TensorMetadata{Name: "x", Datatype: "INT32", Shape: []int64{-1}}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/triton_stream.py", addr, "peer-token").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// startStreamServer starts testdata/stream_server.py and returns its
// address; it stops at the end of the test.
func startStreamServer(t *testing.T, py string) string {
	t.Helper()
	cmd := exec.Command(py, "testdata/stream_server.py")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	var port int
	if _, err := fmt.Fscanf(bufio.NewReader(stdout), "port %d\n", &port); err != nil {
		t.Fatalf("the Python stream server: %v\n%s", err, logs.String())
	}
	go io.Copy(io.Discard, stdout)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// TestPeersPythonStreamServer: our Client against a Python grpcio server
// of ModelStreamInfer on tritonclient's definitions: the tokens of a
// decoupled model through Responses and through a Stream (text and
// numbers, the final flags the server sends, the empty final response
// when asked), requests in flight together, an error answer (a
// ResponseError naming the request) with the stream going on, an
// unknown model, and 1,000 responses of one request.
func TestPeersPythonStreamServer(t *testing.T) {
	py := peerPython(t)
	c := dial(t, startStreamServer(t, py), ClientOptions{})
	ctx := ctxT(t)
	responses, requests := 0, 0
	prompts := []string{"hello", "h\u00e9llo, \u4e16\u754c", "\x00\x01\xff binary"}
	for _, model := range []string{"tokens", "last"} {
		for _, prompt := range prompts {
			i := 0
			for resp, err := range c.Responses(ctx, tokenRequest(model, "r", prompt, 5)) {
				if err != nil {
					t.Fatalf("%s: %v", model, err)
				}
				checkToken(t, resp, "r", prompt, i)
				if resp.Final != (model == "last" && i == 4) {
					t.Fatalf("%s: token %d: final %v", model, i, resp.Final)
				}
				resp.Close()
				i++
			}
			if i != 5 {
				t.Fatalf("%s: %d tokens", model, i)
			}
			responses += i
			requests++
		}
	}
	// On one stream: the empty final response as the request asks, four
	// requests at once, an error answer and an unknown model.
	s, err := c.InferStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	withEmpty := tokenRequest("tokens", "empty", "e", 2)
	withEmpty.Parameters = Parameters{ParamEmptyFinal: true}
	for _, req := range []*InferRequest{withEmpty, tokenRequest("last", "a", "a", 30), tokenRequest("last", "b", "b", 30),
		tokenRequest("fails", "fails", "f", 5), tokenRequest("nothing", "unknown", "x", 1), tokenRequest("last", "after", "z", 3)} {
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		requests++
	}
	s.CloseSend()
	seen := map[string]int{}
	var failed []string
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		var re *ResponseError
		if errors.As(err, &re) {
			failed = append(failed, re.ID+": "+re.Message)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		responses++
		if len(resp.Outputs) == 0 {
			if resp.ID != "empty" || !resp.Final || seen["empty"] != 2 {
				t.Fatalf("an empty response: %+v", resp)
			}
			seen["empty+"]++
			continue
		}
		prompt := map[string]string{"empty": "e", "a": "a", "b": "b", "fails": "f", "after": "z"}[resp.ID]
		checkToken(t, resp, resp.ID, prompt, seen[resp.ID])
		seen[resp.ID]++
		resp.Close()
	}
	if seen["empty"] != 2 || seen["empty+"] != 1 || seen["a"] != 30 || seen["b"] != 30 || seen["fails"] != 2 || seen["after"] != 3 ||
		len(failed) != 2 || !strings.Contains(failed[0], "fails: the model fails after two tokens") || !strings.Contains(failed[1], "unknown: ") {
		t.Fatalf("answers %v, errors %q", seen, failed)
	}
	// 1,000 responses of 16 bytes
	n := 0
	for resp, err := range c.Responses(ctx, &InferRequest{Model: "flood", Inputs: []Input{{Name: "n", Tensor: int32s(1000)}}}) {
		if err != nil {
			t.Fatal(err)
		}
		if y := resp.Output("y"); y == nil || len(y.Bytes()) != 16 || y.Bytes()[15] != 15 {
			t.Fatalf("flood: response %d", n)
		}
		resp.Close()
		n++
	}
	if n != 1000 {
		t.Fatalf("flood: %d responses", n)
	}
	responses += n
	requests++
	t.Logf("dloip client -> Python grpcio stream server: %d responses to %d requests (text, numbers, final flags, the empty final response when asked), 2 error answers (%s; %s) with the stream going on",
		responses, requests, failed[0], failed[1])
}
