//go:build cgo

package dlpack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/misbehave"
)

// TestContractBreakers drives every consumer entry point of the root
// package with the producers of internal/misbehave: each gets an error
// wrapping the case's sentinel, never a panic, and whatever tensor a
// producer returned with its error is released (Outstanding back to 0).
func TestContractBreakers(t *testing.T) {
	entries := []struct {
		name string
		take func(p dlpack.Producer) error
	}{
		{"From", func(p dlpack.Producer) error { return closed(dlpack.From(p)) }},
		{"From writable", func(p dlpack.Producer) error { return closed(dlpack.From(p, dlpack.RequireWritable())) }},
		{"FromRequest versioned", func(p dlpack.Producer) error { return closed(dlpack.FromRequest(p, dlpack.Request{})) }},
		{"FromRequest legacy", func(p dlpack.Producer) error { return closed(dlpack.FromRequest(p, dlpack.Request{Legacy: true})) }},
		{"FromRequest copy", func(p dlpack.Producer) error {
			return closed(dlpack.FromRequest(p, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways}))
		}},
	}
	for _, c := range misbehave.Cases() {
		for _, e := range entries {
			t.Run(c.Name+"/"+e.name, func(t *testing.T) {
				var err error
				require.NotPanics(t, func() { err = e.take(c.P) })
				require.ErrorIs(t, err, c.Want)
				assert.Zero(t, dlpack.Outstanding(), "a tensor returned with the error was not released")
			})
		}
		// Produce takes the Sources among them.
		src, ok := c.P.(dlpack.Source)
		if c.P == nil {
			src, ok = nil, true
		}
		if !ok {
			continue
		}
		for _, req := range []dlpack.Request{{Legacy: true}, {}} {
			t.Run(c.Name+"/Produce", func(t *testing.T) {
				var err error
				var m dlpack.Managed
				require.NotPanics(t, func() { m, err = dlpack.Produce(src, req) })
				require.ErrorIs(t, err, c.Want)
				assert.Nil(t, m.Pointer())
				assert.Zero(t, dlpack.Outstanding())
			})
		}
	}
}

// TestNilArrayDescribes: a nil *Array's own methods return errors, for
// callers that use them directly.
func TestNilArrayDescribes(t *testing.T) {
	var a *dlpack.Array[float32]
	var d dlpack.Description
	require.ErrorIs(t, a.DescribeTensor(&d), dlpack.ErrNilPointer)
	_, err := a.DLPack(dlpack.Request{})
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
	assert.Equal(t, dlpack.CPUDevice, a.DLPackDevice())
}

func closed(f dlpack.Foreign, err error) error {
	if err == nil {
		f.Close()
	}
	return err
}
