//go:build cgo

package dlgomlx_test

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// noPanic runs fn and fails the test if it panics.
func noPanic(t *testing.T, name string, fn func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", name, r)
			}
		}()
		err = fn()
	}()
	return err
}

// Nil tensors, nil producers and a nil *Tensor (a typed nil in a
// dlpack.Producer) are errors wrapping a sentinel, never panics, and
// leave nothing outstanding.
func TestNilInputs(t *testing.T) {
	b := newBackend(t)
	var nilTensor *tensors.Tensor
	var nilExport *dlgomlx.Tensor
	cases := []struct {
		name string
		want error
		fn   func() error
	}{
		{"FromTensor(nil)", dlgomlx.ErrTensor, func() error { _, err := dlgomlx.FromTensor(nilTensor); return err }},
		{"CopyFromTensor(nil)", dlgomlx.ErrTensor, func() error { _, err := dlgomlx.CopyFromTensor(nilTensor); return err }},
		{"FinalizeAll(nil)", dlgomlx.ErrTensor, func() error { return dlgomlx.FinalizeAll(nilTensor) }},
		{"ToTensor(nil)", dlpack.ErrNilPointer, func() error { _, err := dlgomlx.ToTensor(nil, b); return err }},
		{"CopyToTensor(nil)", dlpack.ErrNilPointer, func() error { _, err := dlgomlx.CopyToTensor(nil, b); return err }},
		{"ToTensor((*Tensor)(nil))", dlpack.ErrNilPointer, func() error { _, err := dlgomlx.ToTensor(nilExport, b); return err }},
		{"ToTensor((*Tensor)(nil), nil backend)", dlpack.ErrNilPointer, func() error { _, err := dlgomlx.ToTensor(nilExport, nil); return err }},
		{"CopyToTensor((*Tensor)(nil))", dlpack.ErrNilPointer, func() error { _, err := dlgomlx.CopyToTensor(nilExport, b); return err }},
		{"dlpack.From((*Tensor)(nil))", dlpack.ErrNilPointer, func() error {
			f, err := dlpack.From(nilExport)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"(*Tensor)(nil).DLPack", dlpack.ErrNilPointer, func() error {
			m, err := nilExport.DLPack(dlpack.Request{})
			if err == nil {
				m.Close()
			}
			return err
		}},
	}
	for _, c := range cases {
		err := noPanic(t, c.name, c.fn)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error wrapping %v", c.name, err, c.want)
		}
	}
	if n := dlpack.Outstanding(); n != 0 {
		t.Fatalf("%d exports outstanding", n)
	}
}

// ToTensor of an export whose GoMLX tensor waits for FinalizeAll does
// not hand that tensor back: it would be finalized under the caller when
// the last consumer releases it. It is refused, as FromTensor is.
func TestToTensorOfAnExportWaitingForFinalizeAll(t *testing.T) {
	b := newBackend(t)
	x, err := dlgomlx.ToTensor(dlpack.NewArray([]float32{1, 2, 3, 4}, []int64{4}), b)
	if err != nil {
		t.Fatal(err)
	}
	e, err := dlgomlx.FromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := dlpack.From(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := dlgomlx.FinalizeAll(x); err != nil {
		t.Fatal(err)
	}
	y, err := dlgomlx.ToTensor(e, b)
	if err == nil {
		hold.Close()
		t.Fatalf("ToTensor gave back a tensor waiting for FinalizeAll (same: %v; valid after the last release: %v)", y == x, y.Ok())
	}
	if !errors.Is(err, dlgomlx.ErrTensor) {
		t.Errorf("ToTensor: %v, want ErrTensor", err)
	}
	hold.Close()
	if x.Ok() || dlgomlx.Exports(x) != 0 || dlpack.Outstanding() != 0 {
		t.Fatalf("at the end: ok %v, exports %d, outstanding %d", x.Ok(), dlgomlx.Exports(x), dlpack.Outstanding())
	}
}
