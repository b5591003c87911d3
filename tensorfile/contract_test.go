package tensorfile_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/misbehave"
	"github.com/godlpack/dlpack/tensorfile"
)

// TestWritersTakeMisbehavingProducers: the writers, which take any
// dlpack.Producer, answer the producers of internal/misbehave (nil, typed
// nils, a tensor returned with an error, no tensor) with an error wrapping
// the case's sentinel, never a panic, and nothing outstanding; and a nil
// *Tensor is refused like any nil producer.
func TestWritersTakeMisbehavingProducers(t *testing.T) {
	cases := misbehave.Cases()
	cases = append(cases, misbehave.Case{Name: "typed nil *Tensor", P: (*tensorfile.Tensor)(nil), Want: dlpack.ErrNilPointer})
	writers := []struct {
		name  string
		write func(p dlpack.Producer) error
	}{
		{"WriteNPY", func(p dlpack.Producer) error { return tensorfile.WriteNPY(&bytes.Buffer{}, p) }},
		{"WriteNPZ", func(p dlpack.Producer) error {
			return tensorfile.WriteNPZ(&bytes.Buffer{}, []tensorfile.Named{{Name: "x", Tensor: p}}, false)
		}},
		{"WriteSafetensors", func(p dlpack.Producer) error {
			return tensorfile.WriteSafetensors(&bytes.Buffer{}, []tensorfile.Named{{Name: "x", Tensor: p}}, nil)
		}},
	}
	for _, c := range cases {
		for _, w := range writers {
			t.Run(c.Name+"/"+w.name, func(t *testing.T) {
				var err error
				require.NotPanics(t, func() { err = w.write(c.P) })
				require.ErrorIs(t, err, c.Want)
				assert.Zero(t, dlpack.Outstanding())
			})
		}
	}
}
