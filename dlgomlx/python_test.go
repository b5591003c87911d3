//go:build cgo

package dlgomlx_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The side by side: weights written by Python's safetensors, opened by
// tensorfile, taken into GoMLX by the bridge (one copy each), a softmax
// MLP run on simplego, its results taken by NumPy through DLPack (shared)
// and compared with JAX on the same weights (float32 tolerance; integer
// ops and a transpose bit for bit); then exchanges each way with NumPy.
// Go runs inside Python in the bridges' c-shared library
// (internal/libpybridges): $PYBRIDGES_LIB, or built here when that is
// unset (as make gomlx leaves it for the cgocheck2 run, so that the
// library is built with it too). DLGOMLX_PYTHON names a python with
// NumPy, safetensors and JAX (make gomlx sets it); without it the test
// skips.
func TestNumPyAndJAXSideBySide(t *testing.T) {
	py := os.Getenv("DLGOMLX_PYTHON")
	if py == "" {
		t.Skip("DLGOMLX_PYTHON is not set (make gomlx sets it)")
	}
	lib := os.Getenv("PYBRIDGES_LIB")
	if lib == "" {
		lib = filepath.Join(t.TempDir(), "libpybridges.so")
		gobin := os.Getenv("GO") // the go command that runs the tests (make sets GO)
		if gobin == "" {
			gobin = "go"
		}
		if out, err := exec.Command(gobin, "build", "-buildmode=c-shared", "-o", lib, "../internal/libpybridges").CombinedOutput(); err != nil {
			t.Fatalf("building the c-shared library: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(py, "testdata/mlp.py", lib, t.TempDir(), strconv.Itoa(soakRounds(t)))
	cmd.Env = append(os.Environ(), "JAX_PLATFORMS=cpu")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mlp.py: %v\n%s", err, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(out)), "done") {
		t.Fatalf("mlp.py did not finish:\n%s", out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
