// Package misbehave holds producers that break the dlpack.Producer
// contract, as a careless or hostile user's type would, for the tests of
// every entry point that takes a producer (dlpack.From, FromRequest,
// Produce, the pycapsule helpers, the bridges' constructors): whatever
// the entry point, each case must give an error wrapping Case.Want, and
// leave nothing outstanding (dlpack.Outstanding back where it was).
package misbehave

import (
	"errors"

	"github.com/godlpack/dlpack"
)

// ErrProducer is the error the failing producers return.
var ErrProducer = errors.New("misbehave: the producer failed")

// Case is one misbehaving producer and what an entry point must answer.
type Case struct {
	Name string
	P    dlpack.Producer
	// Want is the sentinel the entry point's error wraps.
	Want error
}

// Cases returns a fresh set of the misbehaving producers.
func Cases() []Case {
	return []Case{
		{"nil producer", nil, dlpack.ErrNilPointer},
		{"typed nil *Array", (*dlpack.Array[float32])(nil), dlpack.ErrNilPointer},
		{"typed nil *Buffer", (*dlpack.Buffer[float32])(nil), dlpack.ErrNilPointer},
		{"typed nil Producer that dereferences", (*Dereferencing)(nil), dlpack.ErrNilPointer},
		{"typed nil Source that dereferences", (*DereferencingSource)(nil), dlpack.ErrNilPointer},
		{"versioned tensor and an error", TensorAndError{}, ErrProducer},
		{"legacy tensor and an error", TensorAndError{Legacy: true}, ErrProducer},
		{"no tensor and no error", NoTensor{}, dlpack.ErrNilPointer},
	}
}

// TensorAndError answers every request with a real managed tensor (a Go
// Array exported by dlpack.Produce, counted by dlpack.Outstanding) and an
// error: the caller must release the tensor.
type TensorAndError struct{ Legacy bool }

// DLPackDevice implements dlpack.Producer.
func (TensorAndError) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer, wrongly.
func (p TensorAndError) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	req.MaxVersion, req.Legacy = dlpack.CurrentVersion, p.Legacy
	// Without cgo Produce fails and m is the zero Managed: the error is
	// still the producer's.
	m, _ := dlpack.Produce(dlpack.NewArray([]float32{1, 2, 3}, nil), req)
	return m, ErrProducer
}

// NoTensor answers with neither a tensor nor an error.
type NoTensor struct{}

// DLPackDevice implements dlpack.Producer.
func (NoTensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer, wrongly.
func (NoTensor) DLPack(dlpack.Request) (dlpack.Managed, error) { return dlpack.Managed{}, nil }

// Dereferencing is a producer whose methods read its fields, so a nil
// *Dereferencing panics in them.
type Dereferencing struct{ dev dlpack.Device }

// DLPackDevice implements dlpack.Producer.
func (p *Dereferencing) DLPackDevice() dlpack.Device { return p.dev }

// DLPack implements dlpack.Producer.
func (p *Dereferencing) DLPack(dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Managed{}, errors.New("misbehave: device " + p.dev.String())
}

// DereferencingSource is a Source whose methods read its fields.
type DereferencingSource struct{ xs []float32 }

// DescribeTensor implements dlpack.Source.
func (s *DereferencingSource) DescribeTensor(d *dlpack.Description) error {
	dlpack.DescribeSlice(d, s.xs)
	d.Owner = s
	return nil
}

// DLPackDevice implements dlpack.Producer.
func (s *DereferencingSource) DLPackDevice() dlpack.Device {
	_ = len(s.xs)
	return dlpack.CPUDevice
}

// DLPack implements dlpack.Producer.
func (s *DereferencingSource) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(s, req)
}
