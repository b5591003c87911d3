//go:build cgo

package dlgrpc

import (
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
)

// TestMain fails the suite if any C memory or export outlives it.
func TestMain(m *testing.M) { leakcheck.Main(m) }
