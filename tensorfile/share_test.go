//go:build cgo

package tensorfile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NumPy takes Go-mapped tensors with numpy.from_dlpack and shares the
// mapping (its arrays lie inside the range Go reports), read-only or
// read-write (a write through NumPy reaches the file); the mapping stays
// until the last array is gone and is then unmapped. NumPy runs in a
// Python process that loads this package in the bridges' c-shared
// library (internal/libpybridges).
func TestNumPySharesTheMapping(t *testing.T) {
	py := python(t)
	lib := os.Getenv("PYBRIDGES_LIB") // built by make once for every bridge's tests
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
	out, err := exec.Command(py, "testdata/share.py", lib, t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("share.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
