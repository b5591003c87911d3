package dloip

import (
	"bytes"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// TestLarge: a 1 GiB input goes to the server and comes back whole (the
// message limits raised to allow it), bit for bit. It takes a few GiB of
// memory and seconds, so plain go test skips it; make oip runs it
// (DLOIP_LARGE set).
func TestLarge(t *testing.T) {
	if os.Getenv("DLOIP_LARGE") == "" {
		t.Skip("DLOIP_LARGE is not set (make oip sets it)")
	}
	const n = 1 << 30
	limit := n + 1<<20
	_, addr := serve(t, Options{MaxMessageBytes: limit}, echoModel("echo", TensorMetadata{Name: "x", Datatype: "UINT8", Shape: []int64{-1}}))
	c := dial(t, addr, ClientOptions{MaxMessageBytes: limit})
	x := &testTensor{dt: dlpack.Uint8, shape: []int64{n}, data: dlpack.AlignedSlice[byte](n), released: new(atomic.Int32)}
	for i := 0; i < n; i += 4096 {
		x.data[i] = byte(i >> 12)
		x.data[i+4095] = byte(i >> 20)
	}
	t0 := time.Now()
	resp, err := c.Infer(ctxT(t), &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	if !bytes.Equal(resp.Output("x").Bytes(), x.data) {
		t.Fatal("the 1 GiB tensor came back changed")
	}
	resp.Close()
	t.Logf("1 GiB there and back in %v, bit for bit", el.Round(time.Millisecond))
}
