package oiponnx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
	"github.com/godlpack/dlpack/dlonnx"
)

// pyCase is one entry of dlonnx/testdata/models.py's cases.json: inputs
// and the outputs ONNX Runtime's Python API gave for them.
type pyCase struct {
	Model   string     `json:"model"`
	Inputs  []pyTensor `json:"inputs"`
	Outputs []pyTensor `json:"outputs"`
}

type pyTensor struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	File  string  `json:"file"`
}

var numpyTypes = map[string]dlpack.DataType{"float32": dlpack.Float32, "float16": dlpack.Float16, "int64": dlpack.Int64, "bool": dlpack.Bool}

// raw is a test producer over bytes of a dtype and shape.
type raw struct {
	dt    dlpack.DataType
	shape []int64
	data  []byte
}

func (r *raw) DescribeTensor(d *dlpack.Description) error {
	*d = dlpack.Description{DType: r.dt, Shape: r.shape, Size: uintptr(len(r.data)), Owner: r}
	if len(r.data) > 0 {
		d.Data = unsafe.Pointer(&r.data[0])
	}
	return nil
}
func (r *raw) DLPackDevice() dlpack.Device                       { return dlpack.CPUDevice }
func (r *raw) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(r, req) }

func (p pyTensor) load(t *testing.T, dir string) *raw {
	t.Helper()
	dt, ok := numpyTypes[p.DType]
	if !ok {
		t.Fatalf("dtype %s", p.DType)
	}
	b, err := os.ReadFile(filepath.Join(dir, p.File))
	if err != nil {
		t.Fatal(err)
	}
	data := dlpack.AlignedSlice[byte](len(b))
	copy(data, b)
	return &raw{dt: dt, shape: p.Shape, data: data}
}

// TestSideBySidePython: every case of dlonnx's side-by-side suite, each
// model served by a dloip Server through New and called by a dloip
// Client: the outputs equal bit for bit what ONNX Runtime's Python API
// gave for the same inputs; the metadata is the session's.
func TestSideBySidePython(t *testing.T) {
	dir := os.Getenv("DLONNX_MODELS")
	if dir == "" || os.Getenv("ONNXRUNTIME_LIB") == "" {
		t.Skip("ONNXRUNTIME_LIB and DLONNX_MODELS are not set (make oip sets them)")
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []pyCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	srv := dloip.NewServer(dloip.Options{})
	served := map[string]bool{}
	var sessions []*dlonnx.Session
	for _, c := range cases {
		name := strings.TrimSuffix(c.Model, ".onnx")
		if served[name] {
			continue
		}
		model, err := os.ReadFile(filepath.Join(dir, c.Model))
		if err != nil {
			t.Fatal(err)
		}
		s, err := dlonnx.NewSession(model)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		m, err := New(name, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Register(m); err != nil {
			t.Fatal(err)
		}
		served[name] = true
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer func() {
		srv.Shutdown()
		for _, s := range sessions {
			s.Destroy()
		}
	}()
	c, err := dloip.Dial(lis.Addr().String(), dloip.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	meta, err := c.ModelMetadata(ctx, "batch_float32", "")
	if err != nil || fmt.Sprint(meta.Inputs) != "[{X FP32 [-1 8] false}]" || fmt.Sprint(meta.Outputs) != "[{Y FP32 [-1 3] false}]" {
		t.Fatalf("metadata %v %v", meta, err)
	}
	n := 0
	for i, pc := range cases {
		req := &dloip.InferRequest{Model: strings.TrimSuffix(pc.Model, ".onnx")}
		for _, in := range pc.Inputs {
			req.Inputs = append(req.Inputs, dloip.Input{Name: in.Name, Tensor: in.load(t, dir)})
		}
		resp, err := c.Infer(ctx, req)
		if err != nil {
			t.Fatalf("case %d (%s): %v", i, pc.Model, err)
		}
		for _, want := range pc.Outputs {
			w := want.load(t, dir)
			got := resp.Output(want.Name)
			if got == nil || got.DataType() != w.dt || fmt.Sprint(got.Shape()) != fmt.Sprint(w.shape) || !bytes.Equal(got.Bytes(), w.data) {
				t.Fatalf("case %d (%s) output %s differs from ONNX Runtime's Python API", i, pc.Model, want.Name)
			}
			n++
		}
		resp.Close()
	}
	t.Logf("oiponnx: %d outputs of %d cases over the protocol bit for bit with ONNX Runtime's Python API", n, len(cases))
}
