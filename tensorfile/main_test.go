//go:build cgo

package tensorfile_test

import (
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
)

// TestMain fails the suite if any C memory outlives it (internal/leakcheck).
// Each test also checks that it leaves no file mapped (noLiveMappings).
func TestMain(m *testing.M) { leakcheck.Main(m) }
