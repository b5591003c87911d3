//go:build cgo

package dlpack_test

import (
	"encoding/binary"
	"math"
	"runtime"
	"unsafe"

	"github.com/godlpack/dlpack/internal/cshim"
)

// f32s returns the little-endian bytes of float32 values.
func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// f64seq returns the bytes of float64 values 0, 1, ..., n-1.
func f64seq(n int) []byte {
	b := make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(i)))
	}
	return b
}

// cpuF32 is a well-formed versioned 1.3 float32 CPU tensor spec.
func cpuF32(shape []int64, data []byte) cshim.Spec {
	return cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: int32(len(shape)), Code: 2, Bits: 32, Lanes: 1,
		Shape: shape, Strides: rowMajor(shape), Data: data}
}

func rowMajor(shape []int64) []int64 {
	s := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

func ptrAdd(p unsafe.Pointer, n int) unsafe.Pointer { return unsafe.Add(p, n) }

// collectBackToBack runs runtime.GC back to back on another goroutine
// until the returned stop is called; stop waits for it to finish.
func collectBackToBack() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
				runtime.GC()
			}
		}
	}()
	return func() { close(quit); <-done }
}
