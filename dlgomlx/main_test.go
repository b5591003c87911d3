//go:build cgo

package dlgomlx_test

import (
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
)

// TestMain fails the suite if any C memory outlives it (internal/leakcheck).
func TestMain(m *testing.M) { leakcheck.Main(m) }
