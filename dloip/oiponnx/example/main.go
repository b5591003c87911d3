//go:build cgo

// Command example serves an ONNX model over the Open Inference Protocol
// and has the Python kserve client call it: a Go service (dloip.Server,
// the model a dlonnx.Session served through oiponnx.New) on 127.0.0.1,
// and kserve's InferenceGRPCClient in a Python process asking whether
// it is ready and running it on a batch. The client's outputs are checked
// bit for bit against the same session run in Go, and the program ends
// with nothing outstanding.
//
// Run it with make oip-example, or by hand:
//
//	ONNXRUNTIME_LIB=/path/to/libonnxruntime.so DLOIP_PYTHON=.venv-oip/bin/python \
//	  go run . /path/to/batch_float32.onnx
//
// (dlonnx/testdata/models.py writes batch_float32.onnx: Y = Relu(X @ W + B),
// X [batch, 8], Y [batch, 3]).
package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
	"github.com/godlpack/dlpack/dloip/oiponnx"
	"github.com/godlpack/dlpack/dlonnx"
	ort "github.com/yalue/onnxruntime_go"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: example model.onnx (with ONNXRUNTIME_LIB and DLOIP_PYTHON set)")
	}
	ort.SetSharedLibraryPath(os.Getenv("ONNXRUNTIME_LIB"))
	if err := ort.InitializeEnvironment(); err != nil {
		log.Fatal(err)
	}
	model, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	sess, err := dlonnx.NewSession(model)
	if err != nil {
		log.Fatal(err)
	}
	m, err := oiponnx.New("mlp", sess)
	if err != nil {
		log.Fatal(err)
	}
	srv := dloip.NewServer(dloip.Options{Name: "example"})
	if err := srv.Register(m); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	fmt.Printf("serving %q on %s: inputs %v, outputs %v\n", "mlp", lis.Addr(), m.Metadata().Inputs, m.Metadata().Outputs)

	// The Python kserve client calls the Go service.
	_, self, _, _ := runtime.Caller(0)
	out, err := exec.Command(os.Getenv("DLOIP_PYTHON"), filepath.Join(filepath.Dir(self), "client.py"), lis.Addr().String()).CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		log.Fatal(err)
	}
	var x, y []byte
	for _, line := range strings.Split(string(out), "\n") {
		if h, ok := strings.CutPrefix(line, "x: "); ok {
			x, _ = hex.DecodeString(h)
		}
		if h, ok := strings.CutPrefix(line, "y: "); ok {
			y, _ = hex.DecodeString(h)
		}
	}

	// The same input run in Go, for the check.
	xs := dlpack.AlignedSlice[float32](len(x) / 4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(x)), x)
	in, err := dlonnx.ToValue(dlpack.NewArray(xs, []int64{int64(len(xs) / 8), 8}))
	if err != nil {
		log.Fatal(err)
	}
	outs, err := sess.Run(in)
	if err != nil {
		log.Fatal(err)
	}
	if !bytes.Equal(outs[0].Bytes(), y) {
		log.Fatal("the kserve client's output differs from the session's")
	}
	fmt.Printf("the kserve client's output equals the session's in Go, bit for bit (%d bytes)\n", len(y))
	outs[0].Destroy()
	in.Destroy()
	srv.Shutdown()
	sess.Destroy()
	for i := 0; dlpack.Outstanding() != 0 && i < 100; i++ {
		runtime.GC()
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
