package dloip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPeersMLServer: our Client against Seldon MLServer 1.7 (its own
// venv, DLOIP_MLSERVER the path of its python; make oip sets it) serving
// a NumPy echo model (testdata/mlserver): every datatype MLServer has (it
// refuses BF16), at every shape, bit for bit. Two losses are the peer's:
// it answers a 0-d tensor with the shape [1] and a 1-d [n] with [n 1];
// and it cannot answer a float NaN given as raw contents at all (see
// noNaNs), so the float tensors sent to it have none.
func TestPeersMLServer(t *testing.T) {
	py := os.Getenv("DLOIP_MLSERVER")
	if py == "" {
		t.Skip("DLOIP_MLSERVER is not set (make oip sets it)")
	}
	dir := t.TempDir()
	for _, f := range []string{"echo_model.py", "model-settings.json"} {
		b, err := os.ReadFile(filepath.Join("testdata/mlserver", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	grpcPort := freePort(t)
	settings, _ := json.Marshal(map[string]any{"grpc_port": grpcPort, "http_port": freePort(t), "metrics_port": freePort(t),
		"host": "127.0.0.1", "grpc_max_message_length": 64 << 20, "parallel_workers": 0, "metrics_endpoint": nil})
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), settings, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(py), "mlserver"), "start", dir)
	cmd.Dir = dir
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	c := dial(t, fmt.Sprintf("127.0.0.1:%d", grpcPort), ClientOptions{})
	ctx := ctxT(t)
	for i := 0; ; i++ {
		if ok, _ := c.ModelReady(ctx, "echo", ""); ok {
			break
		}
		if i == 900 {
			t.Fatal("mlserver did not become ready in 90 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := 0
	for _, shape := range peerShapes {
		for _, d := range kserveDatatypes() {
			dt, _ := ParseDatatype(d)
			x := newRaw(t, dt, shape...)
			noNaNs(d, x.data)
			id := fmt.Sprint(d, shape)
			resp, err := c.Infer(ctx, &InferRequest{Model: "echo", ID: id, Inputs: []Input{{Name: "x_" + d, Tensor: x}}})
			if err != nil {
				t.Fatalf("%s %v: %v", d, shape, err)
			}
			out := resp.Output("x_" + d)
			if out != nil && os.Getenv("DBG") != "" {
				t.Logf("%s %v: got %s %v id %q copied %v bytes %x want %x", d, shape, out.Datatype(), out.Shape(), resp.ID, out.IsCopied(), out.Bytes(), x.data)
			}
			// MLServer's NumpyCodec answers a 0-d array as [1] and a 1-d
			// [n] as [n 1]; the bytes are the same.
			wantShape := fmt.Sprint(shape)
			switch len(shape) {
			case 0:
				wantShape = "[1]"
			case 1:
				wantShape = fmt.Sprint([]int64{shape[0], 1})
			}
			if out == nil || fmt.Sprint(out.Shape()) != wantShape || out.DataType() != dt || resp.ID != id {
				t.Fatalf("%s %v: the output differs from the input", d, shape)
			}
			if !bytes.Equal(out.Bytes(), x.data) {
				t.Fatalf("%s %v: the output differs from the input", d, shape)
			}
			resp.Close()
			n++
		}
	}
	// BYTES is not tried: MLServer 1.7.1's NumpyCodec cannot read BYTES
	// raw contents from a gRPC client (one element "hello" fails with
	// "cannot reshape array of size 5 into shape (1,)", an empty one
	// with size 0); kserve and tritonclient carry text both ways
	// (TestPeersKserveServer, TestPeersClients).
	t.Logf("dloip client -> MLServer: %d tensors (%d datatypes x %d shapes, floats without NaNs) bit for bit", n, len(kserveDatatypes()), len(peerShapes))
}

// noNaNs turns every NaN of an FP16, FP32 or FP64 tensor's bytes into
// the infinity of the same sign:
// MLServer 1.7.1's NumPy codec makes each NaN None, and its raw packer
// then fails the whole answer ("required argument is not a float").
func noNaNs(datatype string, b []byte) {
	var size int
	var exp uint64
	switch datatype {
	case "FP16":
		size, exp = 2, 0x7c00
	case "FP32":
		size, exp = 4, 0x7f800000
	case "FP64":
		size, exp = 8, 0x7ff0000000000000
	default:
		return
	}
	for i := 0; i < len(b); i += size {
		var v uint64
		for j := size - 1; j >= 0; j-- {
			v = v<<8 | uint64(b[i+j])
		}
		if v&exp == exp && v&^(exp|1<<(8*size-1)) != 0 {
			v &^= ^(exp | 1<<(8*size-1)) // a NaN: its mantissa cleared
			for j := range size {
				b[i+j] = byte(v >> (8 * j))
			}
		}
	}
}
