//go:build cgo

package pycapsule_test

import (
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// The two halves of a Go extension for Python, as functions a c-shared
// library exports (//export) and ctypes.PyDLL calls with the GIL held:
// __dlpack__ and __dlpack_device__ of a Python type whose instances refer
// to a Go tensor, and a function that takes any DLPack producer into Go.
// Python objects are PyObject* addresses; results are new references, 0
// with an exception set on failure.
func Example() {
	tensor := dlpack.NewArray(dlpack.AlignedSlice[float32](6), []int64{2, 3})

	// def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None)
	dunderDLPack := func(stream, maxVersion, dlDevice, copy uintptr) uintptr {
		return pycapsule.DLPack(tensor, stream, maxVersion, dlDevice, copy)
	}
	// def __dlpack_device__(self)
	dunderDevice := func() uintptr { return pycapsule.DLPackDevice(tensor) }

	// def total(obj): any object with __dlpack__, or a capsule
	total := func(obj uintptr) (float64, bool) {
		f, err := pycapsule.Import(obj, dlpack.RequireDataType(dlpack.Float64))
		if err != nil {
			pycapsule.Raise(err) // BufferError, TypeError, or the producer's own exception
			return 0, false
		}
		defer f.Close()
		v, err := dlpack.ViewOf[float64](f)
		if err != nil {
			pycapsule.Raise(err)
			return 0, false
		}
		s := 0.0
		for _, x := range v.All() {
			s += x
		}
		return s, true
	}
	_, _, _ = dunderDLPack, dunderDevice, total
}
