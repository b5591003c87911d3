//go:build !cgo

package dlonnx

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Tensor is an ONNX Runtime tensor over DLPack memory. Without cgo
// onnxruntime_go does not build, so no Tensor can be made: the functions
// return dlpack.ErrCgoRequired.
type Tensor struct{}

// ToValue returns dlpack.ErrCgoRequired without cgo.
func ToValue(p dlpack.Producer) (*Tensor, error) { return nil, dlpack.ErrCgoRequired }

// CopyToValue returns dlpack.ErrCgoRequired without cgo.
func CopyToValue(p dlpack.Producer) (*Tensor, error) { return nil, dlpack.ErrCgoRequired }

// NewOutput returns dlpack.ErrCgoRequired without cgo.
func NewOutput(dt dlpack.DataType, shape []int64) (*Tensor, error) {
	return nil, dlpack.ErrCgoRequired
}

// Destroy does nothing without cgo.
func (t *Tensor) Destroy() error { return nil }

// Close does nothing without cgo.
func (t *Tensor) Close() error { return nil }

// Copied reports false without cgo.
func (t *Tensor) Copied() bool { return false }

// DType returns the zero DataType without cgo.
func (t *Tensor) DType() dlpack.DataType { return dlpack.DataType{} }

// Shape returns nil without cgo.
func (t *Tensor) Shape() []int64 { return nil }

// DescribeTensor returns dlpack.ErrCgoRequired without cgo.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error { return dlpack.ErrCgoRequired }

// DLPackDevice returns the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack returns dlpack.ErrCgoRequired without cgo.
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Managed{}, dlpack.ErrCgoRequired
}

// Session needs cgo; without it NewSession returns dlpack.ErrCgoRequired.
type Session struct{}

// NewSession returns dlpack.ErrCgoRequired without cgo.
func NewSession(model []byte) (*Session, error) { return nil, dlpack.ErrCgoRequired }

// Destroy does nothing without cgo.
func (s *Session) Destroy() error { return nil }

// Close does nothing without cgo.
func (s *Session) Close() error { return nil }

// Inputs returns nil without cgo.
func (s *Session) Inputs() []Info { return nil }

// Outputs returns nil without cgo.
func (s *Session) Outputs() []Info { return nil }

// CheckInputs returns dlpack.ErrCgoRequired without cgo.
func (s *Session) CheckInputs(inputs ...*Tensor) error { return dlpack.ErrCgoRequired }

// OutputShapes returns dlpack.ErrCgoRequired without cgo.
func (s *Session) OutputShapes(inputs ...*Tensor) ([][]int64, error) {
	return nil, dlpack.ErrCgoRequired
}

// Run returns dlpack.ErrCgoRequired without cgo.
func (s *Session) Run(inputs ...*Tensor) ([]*Output, error) { return nil, dlpack.ErrCgoRequired }

// RunInto returns dlpack.ErrCgoRequired without cgo.
func (s *Session) RunInto(inputs []*Tensor, outputs []*Tensor) error { return dlpack.ErrCgoRequired }

// Output needs cgo; without it none is made.
type Output struct{}

// FromValue returns dlpack.ErrCgoRequired without cgo.
func FromValue(v unsafe.Pointer) (*Output, error) { return nil, dlpack.ErrCgoRequired }

// Destroy does nothing without cgo.
func (o *Output) Destroy() error { return nil }

// Close does nothing without cgo.
func (o *Output) Close() error { return nil }

// DType returns the zero DataType without cgo.
func (o *Output) DType() dlpack.DataType { return dlpack.DataType{} }

// Shape returns nil without cgo.
func (o *Output) Shape() []int64 { return nil }

// Bytes returns nil without cgo.
func (o *Output) Bytes() []byte { return nil }

// DescribeTensor returns dlpack.ErrCgoRequired without cgo.
func (o *Output) DescribeTensor(d *dlpack.Description) error { return dlpack.ErrCgoRequired }

// DLPackDevice returns the CPU.
func (o *Output) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack returns dlpack.ErrCgoRequired without cgo.
func (o *Output) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Managed{}, dlpack.ErrCgoRequired
}

// Reshape returns dlpack.ErrCgoRequired without cgo.
func (t *Tensor) Reshape(shape []int64) error { return dlpack.ErrCgoRequired }

// Pool needs cgo; without it Get returns dlpack.ErrCgoRequired.
type Pool struct{}

// NewPool returns an empty Pool.
func NewPool() *Pool { return &Pool{} }

// Get returns dlpack.ErrCgoRequired without cgo.
func (p *Pool) Get(dt dlpack.DataType, shape []int64) (*Tensor, error) {
	return nil, dlpack.ErrCgoRequired
}

// Close does nothing without cgo.
func (p *Pool) Close() error { return nil }

// Buffers returns 0 without cgo.
func (p *Pool) Buffers() int { return 0 }
