package dlgonum_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgonum"
)

// TestNilMatrices: every constructor given a nil matrix or vector gives
// an error wrapping dlpack.ErrNilPointer (at once, or from every consumer
// of the Tensor it returns), never a panic.
func TestNilMatrices(t *testing.T) {
	tensors := map[string]func() *dlgonum.Tensor{
		"FromDense":    func() *dlgonum.Tensor { return dlgonum.FromDense(nil) },
		"FromVecDense": func() *dlgonum.Tensor { return dlgonum.FromVecDense(nil) },
		"FromCDense":   func() *dlgonum.Tensor { return dlgonum.FromCDense(nil) },
		"typed nil":    func() *dlgonum.Tensor { return nil },
	}
	for name, make := range tensors {
		t.Run(name, func(t *testing.T) {
			var tn *dlgonum.Tensor
			require.NotPanics(t, func() { tn = make() })
			var d dlpack.Description
			require.ErrorIs(t, tn.DescribeTensor(&d), dlpack.ErrNilPointer)
			_, err := dlpack.From(tn)
			require.ErrorIs(t, err, dlpack.ErrNilPointer)
			for _, req := range []dlpack.Request{{}, dlpack.Request{}, {MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways}} {
				m, err := dlpack.Produce(tn, req)
				if !errors.Is(err, dlpack.ErrCgoRequired) { // built without cgo, Produce describes nothing
					require.ErrorIs(t, err, dlpack.ErrNilPointer)
				}
				assert.Nil(t, m.Pointer())
			}
		})
	}
	assert.Zero(t, dlpack.Outstanding())
}
