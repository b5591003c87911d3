//go:build cgo

package dlonnx_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/stretchr/testify/require"
)

// Destroy while other goroutines run the session waits for their runs to
// return (it freed the session under ONNX Runtime's Run: SIGSEGV); runs
// that start after it fail with dlpack.ErrClosed.
func TestDestroyDuringRun(t *testing.T) {
	models(t)
	a, err := dlonnx.NewOutput(dlpack.Float32, []int64{1024, 4096})
	require.NoError(t, err)
	defer a.Destroy()
	for i := range 24 {
		s := dlSession(t, "add_float32.onnx")
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					outs, err := s.Run(a, a)
					if err != nil {
						if !errors.Is(err, dlpack.ErrClosed) {
							t.Error(err)
						}
						return
					}
					for _, o := range outs {
						o.Destroy()
					}
				}
			}()
		}
		time.Sleep(time.Duration(i) * 250 * time.Microsecond)
		s.Destroy()
		wg.Wait()
		_, err := s.Run(a, a)
		require.ErrorIs(t, err, dlpack.ErrClosed)
	}
}

// RunInto with a destroyed output fails with dlpack.ErrClosed: it
// reported success, wrote nothing into the output, and left ONNX Runtime
// a nil output to allocate, which nobody released.
func TestRunIntoDestroyedOutput(t *testing.T) {
	s := dlSession(t, "add_float32.onnx")
	a, err := dlonnx.NewOutput(dlpack.Float32, []int64{2, 3})
	require.NoError(t, err)
	defer a.Destroy()
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{2, 3})
	require.NoError(t, err)
	y.Destroy()
	err = s.RunInto([]*dlonnx.Tensor{a, a}, []*dlonnx.Tensor{y})
	require.ErrorIs(t, err, dlpack.ErrClosed)
	require.ErrorContains(t, err, `"Y"`)
}
