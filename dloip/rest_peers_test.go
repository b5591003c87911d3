package dloip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// The REST peers, from the venvs make oip installs: kserve 0.21's
// InferenceRESTClient and ModelServer, tritonclient[http] 2.73, MLServer
// 1.7's REST endpoint, and curl. Plain go test skips those that need
// Python (DLOIP_PYTHON, DLOIP_MLSERVER unset); make oip fails if any
// skipped.

// TestPeersRESTClients: kserve's InferenceRESTClient and
// tritonclient.http against our REST server over HTTPS with a bearer
// token: every datatype each has, at every shape, and text, binary data
// both ways and JSON (testdata/peer_rest_clients.py checks, and says
// what each client loses on its side).
func TestPeersRESTClients(t *testing.T) {
	py := peerPython(t)
	p := newPKI(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	listed := echoModel("listed", TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}})
	_, base := serveREST(t, Options{TLS: p.server, Tokens: map[string]string{"peer-token": "peer"}}, dynamicEcho(), listed)
	for _, peer := range []string{"kserve", "triton"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, py, "testdata/peer_rest_clients.py", peer, base, "peer-token", ca).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", peer, err, out)
		}
		t.Log(strings.TrimSpace(string(out)))
	}
}

// startKserveREST is startKserve, returning the REST base URL.
func startKserveREST(t *testing.T, py string) string {
	t.Helper()
	grpcPort, httpPort := freePort(t), freePort(t)
	cmd := exec.Command(py, "testdata/kserve_server.py", "--grpc_port", fmt.Sprint(grpcPort), "--http_port", fmt.Sprint(httpPort))
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
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	c := dialREST(t, base, ClientOptions{})
	for i := 0; ; i++ {
		if ok, _ := c.ModelReady(ctxT(t), "echo", ""); ok {
			return base
		}
		if i == 600 {
			t.Fatal("kserve did not become ready in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPeersRESTKserveServer: our RESTClient against kserve's ModelServer
// REST endpoint serving a NumPy echo model, binary data both ways and
// JSON: every datatype kserve has, at every shape, and text. What is
// lost is kserve's: its REST server turns every input into a Python list
// (InferRequest.from_bytes calls set_data_from_numpy(binary_data=False)),
// so an FP32 signalling NaN comes back quiet and BYTES must be UTF-8
// text; it refuses FP16 as JSON ("Receiving FP16 data via JSON is not
// supported"); its echo model answers in binary data whatever it is
// asked. Everything else is bit for bit.
func TestPeersRESTKserveServer(t *testing.T) {
	py := peerPython(t)
	base := startKserveREST(t, py)
	ctx := ctxT(t)
	bin := dialREST(t, base, ClientOptions{})
	if live, err := bin.ServerLive(ctx); !live || err != nil {
		t.Fatal(live, err)
	}
	if ready, err := bin.ModelReady(ctx, "nope", ""); ready || err == nil {
		t.Fatalf("kserve: an unknown model: %v %v", ready, err)
	}
	counts := map[string]int{}
	for _, c := range []*RESTClient{bin, bin.WithJSON()} {
		mode := map[bool]string{false: "binary", true: "JSON"}[c.json]
		for _, shape := range peerShapes {
			for _, d := range kserveDatatypes() {
				if c.json && d == "FP16" {
					continue
				}
				dt, _ := ParseDatatype(d)
				x := newRaw(t, dt, shape...)
				if c.json {
					noNaNs(d, x.data)
				}
				want := quietNaNs(d, x.data)
				id := fmt.Sprint(d, shape)
				resp, err := c.Infer(ctx, &InferRequest{Model: "echo", ID: id, Inputs: []Input{{Name: "x_" + d, Tensor: x}}})
				if err != nil {
					t.Fatalf("%s: %s %v: %v", mode, d, shape, err)
				}
				out := resp.Output("x_" + d)
				if out == nil || !bytes.Equal(out.Bytes(), want) || fmt.Sprint(out.Shape()) != fmt.Sprint(shape) || out.DataType() != dt || resp.ID != id {
					t.Fatalf("%s: %s %v: the output differs from the input", mode, d, shape)
				}
				resp.Close()
				counts[mode]++
			}
		}
		counts[mode+" text"] = restBytesCases(t, c, ctx, "echo", peerText[:3], nil, nil)
	}
	// FP16 as JSON: kserve's own refusal reaches the caller.
	x := newRaw(t, mustDatatype("FP16"), 2)
	if _, err := bin.WithJSON().Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: x}}}); err == nil {
		t.Fatal("kserve took FP16 as JSON")
	} else {
		t.Logf("kserve on FP16 as JSON: %v", err)
	}
	t.Logf("dloip RESTClient -> kserve ModelServer REST: binary data both ways %d tensors (%d datatypes x %d shapes) and %d BYTES tensors of text, "+
		"JSON %d tensors (no FP16, floats without NaNs) and %d of text, bit for bit (FP32 signalling NaNs made quiet by kserve)",
		counts["binary"], len(kserveDatatypes()), len(peerShapes), counts["binary text"], counts["JSON"], counts["JSON text"])
}

func mustDatatype(d string) dlpack.DataType { dt, _ := ParseDatatype(d); return dt }

// quietNaNs is b, the bytes of a tensor of datatype, with each FP32
// signalling NaN made quiet, as a float32 to float64 to float32 trip
// (Python's float) makes it.
func quietNaNs(datatype string, b []byte) []byte {
	out := append([]byte{}, b...)
	if datatype != "FP32" {
		return out
	}
	for i := 0; i+4 <= len(out); i += 4 {
		v := uint32(out[i]) | uint32(out[i+1])<<8 | uint32(out[i+2])<<16 | uint32(out[i+3])<<24
		if v&0x7f800000 == 0x7f800000 && v&0x007fffff != 0 {
			out[i+2] |= 0x40
		}
	}
	return out
}

// TestPeersRESTMLServer: our RESTClient (JSON: MLServer has no
// binary-data extension) against Seldon MLServer 1.7's REST endpoint
// serving the NumPy echo model (testdata/mlserver): every datatype
// MLServer has, at every shape. What is lost is MLServer's: it answers a
// 0-d tensor with the shape [1] and a 1-d [n] with [n 1] (as over gRPC);
// it writes JSON with orjson, which makes a NaN or an infinity null, so
// the floats sent to it are finite; BYTES must be text (JSON strings),
// and a zero-size BYTES tensor it answers with 500.
func TestPeersRESTMLServer(t *testing.T) {
	py := os.Getenv("DLOIP_MLSERVER")
	if py == "" {
		t.Skip("DLOIP_MLSERVER is not set (make oip sets it)")
	}
	base := startMLServer(t, py)
	c := dialREST(t, base, ClientOptions{}).WithJSON()
	ctx := ctxT(t)
	if live, err := c.ServerLive(ctx); !live || err != nil {
		t.Fatal(live, err)
	}
	n := 0
	for _, shape := range peerShapes {
		for _, d := range kserveDatatypes() {
			dt, _ := ParseDatatype(d)
			x := newRaw(t, dt, shape...)
			finiteOnly(d, x.data)
			id := fmt.Sprint(d, shape)
			resp, err := c.Infer(ctx, &InferRequest{Model: "echo", ID: id, Inputs: []Input{{Name: "x_" + d, Tensor: x}}})
			if err != nil {
				t.Fatalf("%s %v: %v", d, shape, err)
			}
			out := resp.Output("x_" + d)
			wantShape := fmt.Sprint(shape)
			switch len(shape) {
			case 0:
				wantShape = "[1]"
			case 1:
				wantShape = fmt.Sprint([]int64{shape[0], 1})
			}
			if out == nil || fmt.Sprint(out.Shape()) != wantShape || out.DataType() != dt || resp.ID != id || !bytes.Equal(out.Bytes(), x.data) {
				t.Fatalf("%s %v: the output differs from the input", d, shape)
			}
			resp.Close()
			n++
		}
	}
	// MLServer answers a zero-size BYTES tensor with 500, and reshapes
	// [n] to [n 1] here too.
	texts := restBytesCases(t, c, ctx, "echo", peerText[:3], restShapes[1:], func(s []int64) []int64 {
		if len(s) == 1 {
			return []int64{s[0], 1}
		}
		return s
	})
	t.Logf("dloip RESTClient (JSON) -> MLServer REST: %d tensors (%d datatypes x %d shapes, floats finite) and %d BYTES tensors of text bit for bit", n, len(kserveDatatypes()), len(peerShapes), texts)
}

// finiteOnly turns every NaN and infinity of an FP16, FP32 or FP64
// tensor's bytes into a finite value (its exponent's top bit cleared).
func finiteOnly(datatype string, b []byte) {
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
	top := exp &^ (exp >> 1) // the exponent's top bit
	for i := 0; i < len(b); i += size {
		v := getLE(b[i:], size)
		if v&exp == exp {
			putLE(b[i:], v&^top, size)
		}
	}
}

// startMLServer starts `mlserver start` on a copy of testdata/mlserver
// and returns its REST base URL once its model "echo" is ready.
func startMLServer(t *testing.T, py string) string {
	t.Helper()
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
	httpPort := freePort(t)
	settings, _ := json.Marshal(map[string]any{"grpc_port": freePort(t), "http_port": httpPort, "metrics_port": freePort(t),
		"host": "127.0.0.1", "parallel_workers": 0, "metrics_endpoint": nil})
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
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	c := dialREST(t, base, ClientOptions{})
	for i := 0; ; i++ {
		if ok, _ := c.ModelReady(ctxT(t), "echo", ""); ok {
			return base
		}
		if i == 900 {
			t.Fatal("mlserver did not become ready in 90 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPeersRESTCurl: the curl lines of docs/beyond-one-process.md, as
// written there, against our REST server serving "echo" (a Dynamic
// model answering each input as an output of the same name) in place
// of localhost:8000: each must print the answer written under it.
func TestPeersRESTCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	doc, err := os.ReadFile("../docs/beyond-one-process.md")
	if err != nil {
		t.Fatal(err)
	}
	_, base := serveREST(t, Options{}, dynamicEcho())
	lines := strings.Split(string(doc), "\n")
	n := 0
	for i, line := range lines {
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		// the answer: the first line of the next block
		want := ""
		for j := i + 1; j+1 < len(lines); j++ {
			if strings.HasPrefix(lines[j], "```") && j+1 < len(lines) && !strings.HasPrefix(lines[j+1], "```") && lines[j] != "```" {
				want = lines[j+1]
				break
			}
		}
		cmd := strings.ReplaceAll(line, "localhost:8000", strings.TrimPrefix(base, "http://"))
		out, err := exec.Command("bash", "-c", strings.Replace(cmd, "curl ", curl+" ", 1)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Fatalf("%s\ngot  %s (%v)\nwant %s", line, out, err, want)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no curl line in docs/beyond-one-process.md")
	}
	t.Logf("curl -> dloip REST server: the %d curl lines of docs/beyond-one-process.md print what it says, bit for bit", n)
}
