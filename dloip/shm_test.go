package dloip

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
	"google.golang.org/grpc/codes"
)

var shmFiles atomic.Int64

// shmNPY creates a .npy file in /dev/shm (tensorfile.CreateNPY, mapped
// read-write) and returns it, its key, the offset of its data and a
// writable view of the data's bytes.
func shmNPY(t *testing.T, dt dlpack.DataType, shape ...int64) (key string, off uint64, data []byte, tensor *tensorfile.Tensor) {
	t.Helper()
	key = fmt.Sprintf("dloip-test-%d-%d.npy", os.Getpid(), shmFiles.Add(1))
	path := filepath.Join(shmDir, key)
	f, err := tensorfile.CreateNPY(path, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(path) })
	tensor, err = f.Tensor("")
	if err != nil {
		t.Fatal(err)
	}
	ft, err := dlpack.From(tensor, dlpack.RequireWritable())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ft.Close() })
	b, first, err := dlpack.ReadOnlyBytes(ft)
	if err != nil {
		t.Fatal(err)
	}
	data = b[first : first+int(ft.NBytes())]
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return key, uint64(st.Size()) - uint64(len(data)), data, tensor
}

// Inputs and outputs by region, both in files tensorfile created in
// /dev/shm: the server reads the input where the client wrote it and
// writes the output where the client reads it; status, bounds,
// unregistering while in use.
func TestSharedMemory(t *testing.T) {
	if _, err := os.Stat(shmDir); err != nil {
		t.Skip("no /dev/shm")
	}
	held := make(chan *Tensor, 1)
	release := make(chan struct{})
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 1024}}
	keep := ModelFunc(ModelMetadata{Name: "keep", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}},
		func(ctx context.Context, req *Request) ([]Output, error) {
			held <- req.Inputs[0]
			<-release
			return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
		})
	_, addr := serve(t, Options{}, echoModel("echo", x), keep)
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	inKey, inOff, inData, inT := shmNPY(t, dlpack.Float32, 64, 1024)
	outKey, outOff, outData, _ := shmNPY(t, dlpack.Float32, 64, 1024)
	if _, err := rand.Read(inData); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSystemSharedMemory(ctx, "in", inKey, inOff, uint64(len(inData))); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSystemSharedMemory(ctx, "out", "/"+outKey, outOff, uint64(len(outData))); err != nil {
		t.Fatal(err)
	}
	st, err := c.SystemSharedMemoryStatus(ctx, "")
	if err != nil || len(st) != 2 || st[0] != (RegionStatus{Name: "in", Key: inKey, Offset: inOff, ByteSize: 256 << 10}) {
		t.Fatal(st, err)
	}
	resp, err := c.Infer(ctx, &InferRequest{Model: "echo",
		Inputs:  []Input{{Name: "x", Tensor: inT, Region: "in"}},
		Outputs: []RequestedOutput{{Name: "x", Region: "out", Memory: outData}}})
	if err != nil {
		t.Fatal(err)
	}
	out := resp.Output("x")
	if !bytes.Equal(outData, inData) || &out.Bytes()[0] != &outData[0] {
		t.Fatal("the output region does not hold the input region's bytes, or the Tensor does not share it")
	}
	resp.Close()

	// Bounds, on every use.
	err = c.RegisterSystemSharedMemory(ctx, "big", inKey, inOff, 1<<30)
	wantStatus(t, err, codes.InvalidArgument, "lie outside object")
	err = c.RegisterSystemSharedMemory(ctx, "bad", "../etc/passwd", 0, 8)
	wantStatus(t, err, codes.InvalidArgument, "not the name of a shared-memory object")
	err = c.RegisterSystemSharedMemory(ctx, "in", inKey, inOff, 8)
	wantStatus(t, err, codes.AlreadyExists)
	_, err = c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: inT, Region: "in", Offset: 4096}}})
	wantStatus(t, err, codes.InvalidArgument, `input "x"`, "offset 4096 and byte size 262144 lie outside shared-memory region \"in\"")
	_, err = c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: inT, Region: "nope"}}})
	wantStatus(t, err, codes.InvalidArgument, `no shared-memory region "nope"`)
	_, err = c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: inT, Region: "in"}},
		Outputs: []RequestedOutput{{Name: "x", Region: "out", Memory: outData[:100]}}})
	wantStatus(t, err, codes.InvalidArgument, `output "x"`, "shared_memory_byte_size = 100")

	// Unregistering a region a running request uses fails; after, it works.
	done := make(chan error, 1)
	go func() {
		resp, err := c.Infer(ctx, &InferRequest{Model: "keep", Inputs: []Input{{Name: "x", Tensor: inT, Region: "in"}}})
		if err == nil {
			if !bytes.Equal(resp.Output("x").Bytes(), inData) {
				err = fmt.Errorf("kept input differs")
			}
			resp.Close()
		}
		done <- err
	}()
	kept := <-held
	err = c.UnregisterSystemSharedMemory(ctx, "in")
	wantStatus(t, err, codes.FailedPrecondition, `"in"`, "in use")
	if !bytes.Equal(kept.Bytes(), inData) {
		t.Fatal("the input in use changed")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.UnregisterSystemSharedMemory(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if st, err := c.SystemSharedMemoryStatus(ctx, ""); err != nil || len(st) != 0 {
		t.Fatal(st, err)
	}
	_, err = c.SystemSharedMemoryStatus(ctx, "in")
	wantStatus(t, err, codes.NotFound)

	// An object cut short after it was registered: the server's write of
	// an output into it fails with Internal, and the server lives on.
	if err := c.RegisterSystemSharedMemory(ctx, "in", inKey, inOff, uint64(len(inData))); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSystemSharedMemory(ctx, "out", outKey, outOff, uint64(len(outData))); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(shmDir, outKey), 4096); err != nil {
		t.Fatal(err)
	}
	_, err = c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: inT, Region: "in"}},
		Outputs: []RequestedOutput{{Name: "x", Region: "out", Memory: outData}}})
	wantStatus(t, err, codes.Internal, `output "x"`, "cut short")
	if ok, err := c.ServerLive(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
}
