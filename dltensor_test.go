//go:build cgo

package dlpack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bare DLTensor (the legacy struct's first field, with no deleter) is
// viewed in place: the same fields read, nothing released, read-only
// unless AssumeWritable, and the view ends with fn.
func TestBorrowTensor(t *testing.T) {
	spec := cpuF32([]int64{2, 3}, f32s(1, 2, 3, 4, 5, 6))
	spec.Legacy, spec.NullDeleter, spec.Strides = true, true, nil
	ct := cshim.Make(spec)
	defer cshim.Free(ct)
	var kept dlpack.Foreign
	err := dlpack.BorrowTensor(ct.Ptr, func(f dlpack.Foreign) error {
		kept = f
		assert.Equal(t, []int64{2, 3}, f.Shape())
		assert.Equal(t, []int64{3, 1}, f.Strides(), "NULL strides read as row-major")
		assert.True(t, f.Legacy(), "no version, no flags")
		xs, err := dlpack.ReadOnlySlice[float32](f)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, xs)
		_, err = dlpack.Slice[float32](f)
		assert.ErrorIs(t, err, dlpack.ErrReadOnly, "a DLTensor carries no flags: read-only by default")
		_, err = dlpack.From(f)
		assert.ErrorIs(t, err, dlpack.ErrBorrowed, "a view cannot be handed on")
		return nil
	})
	require.NoError(t, err)
	assert.ErrorIs(t, kept.Err(), dlpack.ErrClosed, "the view ends with fn")
	assert.Equal(t, int64(0), ct.Deletes())

	err = dlpack.BorrowTensor(ct.Ptr, func(f dlpack.Foreign) error {
		xs, err := dlpack.Slice[float32](f)
		if err != nil {
			return err
		}
		xs[0] = 7
		return nil
	}, dlpack.AssumeWritable())
	require.NoError(t, err)
	assert.Equal(t, int64(0), ct.Deletes(), "no deleter is ever called")

	want := errors.New("fn's own")
	assert.Same(t, want, dlpack.BorrowTensor(ct.Ptr, func(dlpack.Foreign) error { return want }))
	assert.ErrorIs(t, dlpack.BorrowTensor(nil, func(dlpack.Foreign) error { return nil }), dlpack.ErrNilPointer)
}

// Every malformed DLTensor field that Import rejects, BorrowTensor
// rejects with the same sentinel and field, without calling fn.
func TestBorrowTensorRejectsMalformed(t *testing.T) {
	n := 0
	for _, c := range malformed {
		if !strings.HasPrefix(c.field, "dl_tensor.") {
			continue
		}
		spec := c.spec()
		if !spec.Legacy && (spec.Major != 1 || spec.Minor < 2) {
			continue // the version decides the rule; a DLTensor has none
		}
		if spec.Strides == nil && c.field == "dl_tensor.strides" {
			continue // NULL strides: refused from 1.2 on, row-major for a DLTensor
		}
		spec.Legacy, spec.NullDeleter = true, true
		t.Run(c.name, func(t *testing.T) {
			ct := cshim.Make(spec)
			defer cshim.Free(ct)
			called := false
			err := dlpack.BorrowTensor(ct.Ptr, func(dlpack.Foreign) error { called = true; return nil }, c.opts...)
			require.Error(t, err)
			assert.False(t, called)
			assert.ErrorIs(t, err, c.err)
			var fe *dlpack.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, c.field, fe.Field)
		})
		n++
	}
	require.Greater(t, n, 10, "the table's DLTensor cases ran")
}
