//go:build !cgo

package dlonnx_test

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
)

func TestWithoutCgo(t *testing.T) {
	a := dlpack.NewArray([]float32{1, 2}, []int64{2})
	if _, err := dlonnx.ToValue(a); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("ToValue: %v, want ErrCgoRequired", err)
	}
	if _, err := dlonnx.CopyToValue(a); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("CopyToValue: %v, want ErrCgoRequired", err)
	}
	if _, err := dlonnx.NewOutput(dlpack.Float32, []int64{2}); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("NewOutput: %v, want ErrCgoRequired", err)
	}
	if _, err := dlonnx.NewSession([]byte{1}); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("NewSession: %v, want ErrCgoRequired", err)
	}
	if _, err := dlonnx.FromValue(nil); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("FromValue: %v, want ErrCgoRequired", err)
	}
	if _, err := dlonnx.NewPool().Get(dlpack.Float32, []int64{2}); !errors.Is(err, dlpack.ErrCgoRequired) {
		t.Errorf("Pool.Get: %v, want ErrCgoRequired", err)
	}
}
