//go:build cgo

package oiponnx

import (
	"fmt"
	"os"
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
	ort "github.com/yalue/onnxruntime_go"
)

// TestMain loads ONNX Runtime from $ONNXRUNTIME_LIB when it is set (make
// oip sets it, with the models in $DLONNX_MODELS) and fails the suite if
// any C memory outlives it. Without it the tests skip.
func TestMain(m *testing.M) {
	if lib := os.Getenv("ONNXRUNTIME_LIB"); lib != "" {
		ort.SetSharedLibraryPath(lib)
		if err := ort.InitializeEnvironment(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: loading ONNX Runtime from %s: %v\n", lib, err)
			os.Exit(1)
		}
	}
	leakcheck.Main(m)
}
