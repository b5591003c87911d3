//go:build cgo

package dlpack_test

import (
	"testing"

	"github.com/godlpack/dlpack"
)

func BenchmarkZZWarmDistinct(b *testing.B) {
	bufs := make([][]float32, 1024)
	for i := range bufs {
		bufs[i] = make([]float32, 1024)
	}
	shape := []int64{32, 32}
	i := 0
	benchWarmCThread(b, func() (*dlpack.ManagedTensorVersioned, error) { i++; return dlpack.Export(bufs[i%1024], shape) })
}
