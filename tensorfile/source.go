package tensorfile

import "github.com/godlpack/dlpack"

// DescribeTensor implements dlpack.Source. For a mapped tensor, d.Data is
// the tensor's first byte inside the mapping (not Go memory), d.ReadOnly is
// set unless the file was opened with ReadWrite, and d.Owner is the
// mapping, which stays mapped until the consumer's ReleaseTensor (and the
// File's Close). A copied tensor is described by its dlpack.Buffer, with
// d.Copied set (consumers see FlagIsCopied: writes do not reach the file). It
// fails with dlpack.ErrClosed after the File's Close.
func (t *Tensor) DescribeTensor(d *dlpack.Description) error {
	f := t.file
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return fieldErr(dlpack.ErrClosed, "tensor", t.name, "its file is closed")
	}
	if err := t.checkCRC(); err != nil {
		return err
	}
	if buf := t.buf(); buf != nil {
		if err := buf.DescribeTensor(d); err != nil {
			return err
		}
		d.Copied = true
	} else {
		f.m.refs.Add(1) // the File's own reference is held: never from zero
		*d = dlpack.Description{Size: uintptr(t.nbytes), Owner: f.m}
		if t.nbytes > 0 {
			d.Data = t.data()
		}
	}
	d.DType, d.Shape, d.Strides = t.dtype, t.shape(), t.strides()
	d.Device = dlpack.CPUDevice
	d.ReadOnly = t.readOnly
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *Tensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer: dlpack.Produce(t, req).
func (t *Tensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(t, req)
}
