//go:build !cgo

package dlpack_test

import (
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without cgo the types, parsing and validation work, and every operation
// that needs C reports ErrCgoRequired instead of failing obscurely.
func TestWithoutCgo(t *testing.T) {
	_, err := dlpack.Export([]float32{1}, []int64{1})
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
	_, err = dlpack.ExportLegacy([]float32{1}, []int64{1})
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
	_, err = dlpack.NewBuffer[float32]([]int64{2})
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
	var m dlpack.ManagedTensorVersioned
	_, err = dlpack.Import(unsafe.Pointer(&m))
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
	err = dlpack.Borrow(unsafe.Pointer(&m), func(dlpack.Foreign) error { return nil })
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
	assert.Equal(t, int64(0), dlpack.Outstanding())
	dt, err := dlpack.ParseDataType("bfloat16")
	require.NoError(t, err)
	assert.NoError(t, dt.Validate())
}

// Go to Go needs no C: From takes an Array without cgo; handing it to C
// (Produce) reports ErrCgoRequired.
func TestProtocolWithoutCgo(t *testing.T) {
	a := dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{2, 2})
	f, err := dlpack.From(a)
	require.NoError(t, err)
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, a.Data, xs)
	require.NoError(t, f.Close())
	_, err = a.DLPack(dlpack.Request{})
	require.ErrorIs(t, err, dlpack.ErrCgoRequired)
}
