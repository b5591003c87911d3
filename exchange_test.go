//go:build cgo

package dlpack_test

import (
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Our published table, used from C through include/dlpack/dlpack.h.
func TestPublishedExchangeAPIFromC(t *testing.T) {
	api := dlpack.PublishedExchangeAPI()
	require.NotNil(t, api)
	assert.Equal(t, dlpack.CurrentVersion, api.Header.Version)
	assert.Equal(t, "", cshim.ExerciseTable(unsafe.Pointer(api)))
	assert.Equal(t, int64(0), dlpack.Outstanding(), "C released everything it allocated")
}

// Our own table consumed from Go: allocate, write, import, release.
func TestPublishedExchangeAPIFromGo(t *testing.T) {
	c, err := dlpack.OpenExchangeAPI(unsafe.Pointer(dlpack.PublishedExchangeAPI()))
	require.NoError(t, err)
	f, err := c.Allocate(dlpack.Float64, []int64{3, 4}, dlpack.CPUDevice)
	require.NoError(t, err)
	assert.Equal(t, int64(1), dlpack.Outstanding())
	xs, err := dlpack.Slice[float64](f)
	require.NoError(t, err)
	assert.Len(t, xs, 12)
	assert.Equal(t, uintptr(0), f.DataAddr()%256)
	for i := range xs {
		assert.Zero(t, xs[i])
		xs[i] = float64(i)
	}
	require.NoError(t, f.Close())
	assert.Equal(t, int64(0), dlpack.Outstanding())

	_, err = c.Allocate(dlpack.Float32, []int64{2}, dlpack.Device{Type: dlpack.CUDA})
	require.ErrorIs(t, err, dlpack.ErrExchangeAPI)
	assert.Contains(t, err.Error(), "BufferError: this allocator makes CPU tensors only")
	s, err := c.CurrentWorkStream(dlpack.CPUDevice)
	require.NoError(t, err)
	assert.Zero(t, s)
	_, err = c.CurrentWorkStream(dlpack.Device{Type: dlpack.CUDA})
	assert.ErrorIs(t, err, dlpack.ErrExchangeAPI)
}

// A foreign library's table: skip the v2.0 head, use the v1.3 table behind
// it, allocate through it and release exactly once.
func TestForeignExchangeAPI(t *testing.T) {
	c, err := dlpack.OpenExchangeAPI(cshim.ForeignAPI(0))
	require.NoError(t, err)
	assert.Equal(t, dlpack.Version{Major: 1, Minor: 3}, c.Version())
	assert.Equal(t, dlpack.Version{Major: 1, Minor: 3}, c.API().Header.Version, "API is the table found behind the v2.0 head")
	assert.NotEqual(t, cshim.ForeignAPI(0), unsafe.Pointer(c.API()))
	before := cshim.ForeignDeletes()
	f, err := c.Allocate(dlpack.Float32, []int64{2, 3}, dlpack.CPUDevice, dlpack.RequireContiguous())
	require.NoError(t, err)
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5}, xs)
	f.Close()
	assert.Equal(t, before+1, cshim.ForeignDeletes())

	_, err = c.Allocate(dlpack.Float32, []int64{1, 1, 1, 1, 1}, dlpack.CPUDevice)
	require.ErrorIs(t, err, dlpack.ErrExchangeAPI)
	assert.Contains(t, err.Error(), "ValueError: foreign allocator: float32 up to 4-d only")
	// A tensor the allocator makes but the import rejects is released.
	_, err = c.Allocate(dlpack.Float32, []int64{2}, dlpack.CPUDevice, dlpack.RequireNDim(3))
	require.ErrorIs(t, err, dlpack.ErrRequirement)
	assert.Equal(t, before+2, cshim.ForeignDeletes())

	s, err := c.CurrentWorkStream(dlpack.Device{Type: dlpack.CUDA, ID: 2})
	require.NoError(t, err)
	assert.Equal(t, uintptr(0x1002), s)

	for which := 1; which <= 2; which++ {
		_, err = dlpack.OpenExchangeAPI(cshim.ForeignAPI(which))
		require.ErrorIs(t, err, dlpack.ErrExchangeAPI, "table %d has no usable version", which)
	}
	_, err = dlpack.OpenExchangeAPI(nil)
	require.ErrorIs(t, err, dlpack.ErrNilPointer)
}
