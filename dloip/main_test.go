//go:build cgo

package dloip

import (
	"testing"

	"github.com/godlpack/dlpack/internal/leakcheck"
)

// TestMain fails the suite if any C memory or export outlives it.
func TestMain(m *testing.M) { leakcheck.Main(m) }
