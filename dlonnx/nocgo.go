//go:build !cgo

package dlonnx

import "github.com/godlpack/dlpack"

// Tensor is an ONNX Runtime tensor over DLPack memory. Without cgo
// onnxruntime_go does not build, so no Tensor can be made: the functions
// return dlpack.ErrCgoRequired.
type Tensor struct{}

// ToValue returns dlpack.ErrCgoRequired without cgo.
func ToValue(p dlpack.Producer) (*Tensor, error) { return nil, dlpack.ErrCgoRequired }

// CopyToValue returns dlpack.ErrCgoRequired without cgo.
func CopyToValue(p dlpack.Producer) (*Tensor, error) { return nil, dlpack.ErrCgoRequired }

// NewOutput returns dlpack.ErrCgoRequired without cgo.
func NewOutput(dt dlpack.DataType, shape ...int64) (*Tensor, error) {
	return nil, dlpack.ErrCgoRequired
}

// Destroy does nothing without cgo.
func (t *Tensor) Destroy() error { return nil }

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
