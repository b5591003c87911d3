//go:build cgo

package dlonnx_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/internal/misbehave"
)

// TestConstructorsTakeMisbehavingProducers: ToValue and CopyToValue
// answer the producers of internal/misbehave with an error wrapping the
// case's sentinel, never a panic, and nothing outstanding; a nil *Tensor
// is refused like any nil producer. No model runs: ONNX Runtime is not
// needed.
func TestConstructorsTakeMisbehavingProducers(t *testing.T) {
	cases := misbehave.Cases()
	cases = append(cases, misbehave.Case{Name: "typed nil *Tensor", P: (*dlonnx.Tensor)(nil), Want: dlpack.ErrNilPointer})
	for _, c := range cases {
		for name, make := range map[string]func(dlpack.Producer) (*dlonnx.Tensor, error){
			"ToValue": dlonnx.ToValue, "CopyToValue": dlonnx.CopyToValue,
		} {
			t.Run(c.Name+"/"+name, func(t *testing.T) {
				var err error
				var tn *dlonnx.Tensor
				require.NotPanics(t, func() { tn, err = make(c.P) })
				require.ErrorIs(t, err, c.Want)
				assert.Nil(t, tn)
				assert.Zero(t, dlpack.Outstanding())
			})
		}
	}
}
