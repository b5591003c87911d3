//go:build cgo

// Package leakcheck is the count-based leak check for C memory shared by
// the test packages: run the tests, then require that every C block of
// package dlpack and every tensor of the C test producer has been freed and
// nothing exported is outstanding, giving cleanups a few seconds of GC.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// Main runs m and exits; it fails the run if C memory leaked.
func Main(m *testing.M) {
	code := m.Run()
	clean := func() bool {
		return dlpack.ReadStats().CBlocks == 0 && dlpack.Outstanding() == 0 && cshim.Live() == 0
	}
	for deadline := time.Now().Add(5 * time.Second); !clean() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if !clean() {
		fmt.Fprintf(os.Stderr, "FAIL: C memory leaked by the tests: package blocks %d, outstanding exports %d, producer tensors %d\n",
			dlpack.ReadStats().CBlocks, dlpack.Outstanding(), cshim.Live())
		code = 1
	}
	os.Exit(code)
}
