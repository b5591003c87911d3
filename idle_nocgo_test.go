//go:build !cgo

package dlpack_test

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// Without cgo there are no export records to release and no tensors to
// view: both calls answer without touching C.
func TestReleaseIdleAndBytesWithoutCgo(t *testing.T) {
	if n := dlpack.ReleaseIdle(); n != 0 {
		t.Fatalf("ReleaseIdle released %d records without cgo", n)
	}
	if _, _, err := dlpack.ReadOnlyBytes(dlpack.Foreign{}); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("ReadOnlyBytes of the zero Foreign: %v, want ErrClosed", err)
	}
}
