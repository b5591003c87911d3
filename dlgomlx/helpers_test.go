//go:build cgo

package dlgomlx_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// newBackend returns a fresh simplego backend, finalized at the end of the test.
func newBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// deviceOnly is simplego with its shared buffers hidden: GoMLX then
// treats its buffers as device memory it must transfer, as for XLA on a
// GPU. Every buffer operation is still simplego's own.
type deviceOnly struct{ backends.Backend }

func (deviceOnly) HasSharedBuffers() bool { return false }

// bytesOf returns a copy of the bytes of t's elements.
func bytesOf(t testing.TB, x *tensors.Tensor) []byte {
	t.Helper()
	var out []byte
	err := x.ConstFlatData(func(flat any) {
		v := reflect.ValueOf(flat)
		if v.Len() == 0 {
			return
		}
		out = bytes.Clone(unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*int(v.Type().Elem().Size())))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// addrOf returns the address of t's first element as ConstFlatData sees it.
func addrOf(t testing.TB, x *tensors.Tensor) uintptr {
	t.Helper()
	var a uintptr
	if err := x.ConstFlatData(func(flat any) {
		if v := reflect.ValueOf(flat); v.Len() > 0 {
			a = uintptr(v.UnsafePointer())
		}
	}); err != nil {
		t.Fatal(err)
	}
	return a
}

// randomBytes returns n bytes of valid elements of dt (bools 0 or 1).
func randomBytes(r *rand.Rand, n int, dt dtypes.DType) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
		if dt == dtypes.Bool {
			b[i] &= 1
		}
	}
	return b
}

// localTensor makes a local GoMLX tensor of dt and dims holding raw.
func localTensor(t testing.TB, dt dtypes.DType, raw []byte, dims ...int) *tensors.Tensor {
	t.Helper()
	x := tensors.FromShape(shapes.Make(dt, dims...))
	if err := x.MutableFlatData(func(flat any) {
		v := reflect.ValueOf(flat)
		if v.Len() > 0 {
			copy(unsafe.Slice((*byte)(v.UnsafePointer()), len(raw)), raw)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return x
}

// foreignBytes returns a copy of a compact Foreign's bytes.
func foreignBytes(t testing.TB, f dlpack.Foreign) []byte {
	t.Helper()
	b, first, err := dlpack.ReadOnlyBytes(f)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		return nil
	}
	return bytes.Clone(b[first : first+int(f.NBytes())])
}

// cTensor makes a C-producer tensor (counting deleter) of dt with data.
func cTensor(dt dlpack.DataType, shape, strides []int64, data []byte, shift int) cshim.Tensor {
	return cshim.Make(cshim.Spec{Major: 1, Minor: 1, DeviceType: 1, NDim: int32(len(shape)), Code: uint8(dt.Code), Bits: dt.Bits, Lanes: 1,
		Shape: shape, Strides: strides, Data: data, DataShift: shift, AllocData: true})
}

func dims64(d []int) []int64 {
	out := make([]int64, len(d))
	for i, x := range d {
		out[i] = int64(x)
	}
	return out
}

// sizeOf is the number of elements of dims.
func sizeOf(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

var _ = dlgomlx.ReadStats
