//go:build cgo

package dlpack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
)

// checkedSource hands out a description checked once.
type checkedSource struct {
	cd  *dlpack.CheckedDescription
	own *countingOwner
}

func (s *checkedSource) DescribeTensor(d *dlpack.Description) error {
	d.Checked, d.Owner = s.cd, s.own
	return nil
}
func (s *checkedSource) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }
func (s *checkedSource) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(s, req)
}

// TestCheckedDescription: a description checked once (CheckDescription)
// and handed out through Description.Checked gives consumers what the same
// description checked at each export gives, through Produce (shared,
// legacy copy, forced copy) and From; it keeps its own shape and strides;
// and the checks are the same (errors name description.<field>).
func TestCheckedDescription(t *testing.T) {
	plain := newCounting(12, 3, 2)
	plain.strides, plain.offset, plain.readOnly = []int64{-4, 2}, 8*8, true
	var d dlpack.Description
	require.NoError(t, plain.DescribeTensor(&d))
	cd, err := dlpack.CheckDescription(&d)
	require.NoError(t, err)
	d.Shape[0], d.Strides[1] = 99, 99 // the caller's slices change; the checked copy does not
	plain.shape, plain.strides = []int64{3, 2}, []int64{-4, 2}
	checked := &checkedSource{cd: cd, own: new(countingOwner)}

	reqs := []dlpack.Request{
		dlpack.Request{},
		{}, // legacy: read-only data is copied
		{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways},
	}
	for _, req := range reqs {
		var got [2][]float64
		var shapes, strides [2][]int64
		for i, s := range []interface {
			dlpack.Source
			dlpack.Producer
		}{plain, checked} {
			f, err := dlpack.FromRequest(s, req)
			require.NoError(t, err)
			v, err := dlpack.ViewOf[float64](f)
			require.NoError(t, err)
			for _, x := range v.All() {
				got[i] = append(got[i], x)
			}
			shapes[i], strides[i] = f.Shape(), f.Strides()
			f.Close()
			m, err := dlpack.Produce(s, req)
			require.NoError(t, err)
			f, err = m.Import()
			require.NoError(t, err)
			assert.Equal(t, shapes[i], f.Shape())
			f.Close()
		}
		assert.Equal(t, got[0], got[1], "%+v", req)
		assert.Equal(t, []float64{8, 10, 4, 6, 0, 2}, got[1])
		assert.Equal(t, shapes[0], shapes[1])
		assert.Equal(t, strides[0], strides[1])
	}
	assert.Equal(t, int64(2*len(reqs)), checked.own.released.Load(), "the owner is released once per export")
	assert.Zero(t, dlpack.Outstanding())

	bad := dlpack.Description{Data: d.Data, Size: d.Size, DType: dlpack.Float64, Shape: []int64{-1}}
	_, err = dlpack.CheckDescription(&bad)
	require.ErrorIs(t, err, dlpack.ErrShape)
	assert.Contains(t, err.Error(), "description.shape[0]")
	bad = dlpack.Description{Checked: cd}
	_, err = dlpack.CheckDescription(&bad)
	require.ErrorIs(t, err, dlpack.ErrRequest)
}
