//go:build cgo

package dlpack_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// TestMain is the suite's count-based leak check for C memory: after all
// tests, every C block this package allocated (export blocks, buffers) and
// every tensor the C test producer made must have been freed, and nothing
// exported may be outstanding. Cleanups get a few seconds of GC to run.
func TestMain(m *testing.M) {
	code := m.Run()
	clean := func() bool {
		s := dlpack.ReadStats()
		return s.CBlocks == 0 && dlpack.Outstanding() == 0 && cshim.Live() == 0
	}
	if !waitFor(clean) {
		s := dlpack.ReadStats()
		fmt.Fprintf(os.Stderr, "FAIL: C memory leaked by the suite: package blocks %d, outstanding exports %d, producer tensors %d\n",
			s.CBlocks, dlpack.Outstanding(), cshim.Live())
		code = 1
	}
	os.Exit(code)
}
