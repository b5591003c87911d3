package dloip

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// The real peers, from the venv that make oip installs
// (testdata/requirements.txt): kserve 0.21's ModelServer and
// InferenceGRPCClient, and tritonclient[grpc] 2.73. Plain go test skips
// them (DLOIP_PYTHON unset); make oip sets it and fails if any skipped.

func peerPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("DLOIP_PYTHON")
	if py == "" {
		t.Skip("DLOIP_PYTHON is not set (make oip sets it)")
	}
	return py
}

// freePort finds a loopback port for a peer to listen on.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// kserveDatatypes are the datatypes kserve has (it refuses BF16).
func kserveDatatypes() []string {
	var out []string
	for _, d := range Datatypes() {
		if d != "BF16" {
			out = append(out, d)
		}
	}
	return out
}

var peerShapes = [][]int64{{}, {0}, {7}, {3, 0, 2}, {2, 3, 4}, {256, 1024}}

// TestPeersKserveServer: our Client against kserve's ModelServer serving
// a NumPy model that echoes its inputs through NumPy: every datatype
// kserve has, at every shape, bit for bit.
func TestPeersKserveServer(t *testing.T) {
	py := peerPython(t)
	c := dial(t, startKserve(t, py, 64<<20), ClientOptions{})
	ctx := ctxT(t)
	if live, err := c.ServerLive(ctx); !live || err != nil {
		t.Fatal(live, err)
	}
	n := 0
	for _, shape := range peerShapes {
		for _, d := range kserveDatatypes() {
			dt, _ := ParseDatatype(d)
			x := newRaw(t, dt, shape...)
			id := fmt.Sprint(d, shape)
			resp, err := c.Infer(ctx, &InferRequest{Model: "echo", ID: id, Inputs: []Input{{Name: "x_" + d, Tensor: x}}})
			if err != nil {
				t.Fatalf("%s %v: %v", d, shape, err)
			}
			out := resp.Output("x_" + d)
			if out == nil || !bytes.Equal(out.Bytes(), x.data) || fmt.Sprint(out.Shape()) != fmt.Sprint(shape) || out.DataType() != dt || resp.ID != id {
				t.Fatalf("%s %v: the output differs from the input", d, shape)
			}
			resp.Close()
			n++
		}
	}
	// kserve refuses BF16 with its own error, which reaches the caller.
	x := newRaw(t, dlpack.BFloat16, 2)
	if _, err := c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}}); err == nil {
		t.Fatal("kserve took BF16")
	} else {
		t.Logf("kserve on BF16: %v", err)
	}
	texts := bytesCases(t, c, ctx, "echo", peerText, func(shape []int64) []int64 { return shape })
	t.Logf("dloip client -> kserve ModelServer: %d tensors (%d datatypes x %d shapes) and %d BYTES tensors of text bit for bit", n, len(kserveDatatypes()), len(peerShapes), texts)
}

// TestPeersClients: kserve's InferenceGRPCClient and tritonclient.grpc
// against our Server over TLS with a bearer token: every datatype each
// has, at every shape, bit for bit (testdata/peer_clients.py checks).
func TestPeersClients(t *testing.T) {
	py := peerPython(t)
	p := newPKI(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// One Dynamic model echoes every datatype at every shape; "listed"
	// is for the metadata.
	listed := echoModel("listed", TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}})
	_, addr := serve(t, Options{TLS: p.server, Tokens: map[string]string{"peer-token": "peer"}}, dynamicEcho(), listed)
	for _, peer := range []string{"kserve", "triton"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, py, "testdata/peer_clients.py", peer, addr, "peer-token", ca).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", peer, err, out)
		}
		t.Log(strings.TrimSpace(string(out)))
	}
}

// TestPeersTritonSharedMemory: tritonclient's shared-memory regions
// (tritonclient.utils.shared_memory) used by our Server for inputs and
// outputs, every datatype, at offsets 0, 8 and 64, bit for bit
// (testdata/triton_shm.py checks).
func TestPeersTritonSharedMemory(t *testing.T) {
	py := peerPython(t)
	_, addr := serve(t, Options{}, dynamicEcho())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/triton_shm.py", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// startKserve starts testdata/kserve_server.py (message limit limit) on
// loopback ports, waits until its model "echo" is ready, and returns its
// gRPC address; it is killed at the end of the test.
func startKserve(t *testing.T, py string, limit int) string {
	t.Helper()
	grpcPort, httpPort := freePort(t), freePort(t)
	cmd := exec.Command(py, "testdata/kserve_server.py", "--grpc_port", fmt.Sprint(grpcPort), "--http_port", fmt.Sprint(httpPort),
		"--grpc_max_send_message_length", fmt.Sprint(limit), "--grpc_max_receive_message_length", fmt.Sprint(limit))
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
	addr := fmt.Sprintf("127.0.0.1:%d", grpcPort)
	c := dial(t, addr, ClientOptions{})
	for i := 0; ; i++ {
		if ok, _ := c.ModelReady(ctxT(t), "echo", ""); ok {
			return addr
		}
		if i == 600 {
			t.Fatal("kserve did not become ready in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPeersTritonRegionsGoClient: regions tritonclient's
// shared_memory module made, used by our Client (against our Server):
// the input read from one, the output written into the other and read
// back by tritonclient's get_contents_as_numpy, bit for bit.
func TestPeersTritonRegionsGoClient(t *testing.T) {
	py := peerPython(t)
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 1024}}
	_, addr := serve(t, Options{}, echoModel("echo", x))
	c := dial(t, addr, ClientOptions{})
	cmd := exec.Command(py, "testdata/triton_regions.py")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	var kin, kout string
	var size uint64
	if _, err := fmt.Fscanln(r, &kin, &kout, &size); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	ctx := ctxT(t)
	for name, key := range map[string]string{"in": kin, "out": kout} {
		if err := c.RegisterSystemSharedMemory(ctx, name, key, 0, size); err != nil {
			t.Fatal(err)
		}
	}
	inMem, outMem := mapObject(t, kin, size), mapObject(t, kout, size)
	in := &testTensor{dt: dlpack.Float32, shape: []int64{256, 1024}, data: inMem, released: new(atomic.Int32)}
	resp, err := c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: in, Region: "in"}},
		Outputs: []RequestedOutput{{Name: "x", Region: "out", Memory: outMem}}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Output("x").Bytes(), inMem) {
		t.Fatal("the output region differs from the input region")
	}
	resp.Close()
	if err := c.UnregisterSystemSharedMemory(ctx, ""); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin)
	line, _ := bufio.NewReader(r).ReadString('\n')
	if err := cmd.Wait(); err != nil || !strings.Contains(line, "bit for bit") {
		t.Fatalf("%v: %s %s", err, line, out.String())
	}
	t.Log(strings.TrimSpace(line))
}

// mapObject maps size bytes of the POSIX shared-memory object key, for
// the length of the test.
func mapObject(t *testing.T, key string, size uint64) []byte {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(shmDir, strings.TrimPrefix(key, "/")), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	return m
}

// peerText is the text the peers' BYTES cases carry: empty, ASCII,
// UTF-8, binary with zeros, 1 MiB.
var peerText = [][]byte{{}, []byte("hello"), []byte("h\u00e9llo, \u4e16\u754c \U0001f600"), {0, 1, 0xff, 0}, bytes.Repeat([]byte("x"), 1<<20)}

// bytesCases sends BYTES tensors of peerText at several shapes to an echo
// model through c and requires them back bit for bit, at the shape
// answer gives for each (the peers' own reshaping); it returns how many.
func bytesCases(t *testing.T, c *Client, ctx context.Context, model string, text [][]byte, answer func([]int64) []int64) int {
	t.Helper()
	n := 0
	for _, shape := range [][]int64{{1}, {5}, {2, 3}} {
		k := int(shape[0])
		if len(shape) > 1 {
			k *= int(shape[1])
		}
		bt := &BytesTensor{Shape: shape}
		for i := range k {
			bt.Elements = append(bt.Elements, text[i%len(text)])
		}
		resp, err := c.Infer(ctx, &InferRequest{Model: model, Inputs: []Input{{Name: "text", Tensor: bt}}})
		if err != nil {
			t.Fatalf("BYTES %v: %v", shape, err)
		}
		out := resp.Output("text")
		if out == nil || out.Datatype() != BYTES || fmt.Sprint(out.Shape()) != fmt.Sprint(answer(shape)) || len(out.Elements()) != k {
			t.Fatalf("BYTES %v: the output differs from the input", shape)
		}
		for i, e := range out.Elements() {
			if !bytes.Equal(e, bt.Elements[i]) {
				t.Fatalf("BYTES %v: element %d differs", shape, i)
			}
		}
		resp.Close()
		n++
	}
	return n
}
