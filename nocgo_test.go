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
	_, err = dlpack.NewBuffer[float32](2)
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
