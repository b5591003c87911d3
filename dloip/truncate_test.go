//go:build unix

package dloip

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
	"google.golang.org/grpc/codes"
)

// A mapped tensor (a tensorfile file) whose file another process cuts
// short is not sent: the client's Infer fails with an error naming
// ErrTruncated, and a server whose model returns such a tensor answers
// codes.Internal, instead of either process dying of SIGBUS in gRPC's
// writer; the server serves on.
func TestMappedFileTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.npy")
	src := newRaw(t, dlpack.Float32, 256, 1024)
	var buf bytes.Buffer
	if err := tensorfile.WriteNPY(&buf, src); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn, err := f.Tensor("")
	if err != nil {
		t.Fatal(err)
	}
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 1024}}
	fromFile := ModelFunc(ModelMetadata{Name: "file", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}},
		func(context.Context, *Request) ([]Output, error) { return []Output{{Name: "x", Tensor: tn}}, nil })
	_, addr := serve(t, Options{}, echoModel("echo", x), fromFile)
	c := dial(t, addr, ClientOptions{})
	// Whole, it goes out bit for bit.
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: tn}}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Output("x").Bytes(), src.data) {
		t.Fatal("the mapped tensor went out changed")
	}
	resp.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: tn}}})
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("client: %v", err)
	}
	t.Logf("client: %v", err)
	small := newRaw(t, dlpack.Float32, 1, 1024)
	_, err = c.Infer(ctxT(t), &InferRequest{Model: "file", Inputs: []Input{{Name: "x", Tensor: small}}})
	wantStatus(t, err, codes.Internal, ErrTruncated.Error())
	t.Logf("server: %v", err)
	resp, err = c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: small}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
}
