//go:build cgo

package pycapsule_test

import (
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
	"github.com/godlpack/dlpack/pycapsule"
)

// initBeforePython is what Init reported before any test could start the
// embedded interpreter.
var initBeforePython error

// TestMain fails the suite if any C memory outlives it (internal/leakcheck).
func TestMain(m *testing.M) {
	initBeforePython = pycapsule.Init()
	leakcheck.Main(m)
}
