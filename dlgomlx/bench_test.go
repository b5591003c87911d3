//go:build cgo

package dlgomlx_test

import (
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// The bridge against GoMLX's own copying paths, for 1 KiB, 1 MiB and
// 256 MiB of float32. Zero-copy rows must not grow with the size:
//
//	go test -run '^$' -bench . -benchtime 200ms ./dlgomlx
var benchSizes = []struct {
	name string
	n    int // float32 elements
}{{"1KiB", 256}, {"1MiB", 256 << 10}, {"256MiB", 64 << 20}}

// Out of GoMLX: a tensor handed to a consumer.
func BenchmarkOut(b *testing.B) {
	for _, s := range benchSizes {
		x := tensors.FromFlatDataAndDimensions(make([]float32, s.n), s.n)
		// The bridge, to C (Produce: a C block, the deleter): no copy.
		b.Run("bridge-FromTensor-DLPack/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				e, err := dlgomlx.FromTensor(x)
				if err != nil {
					b.Fatal(err)
				}
				m, err := e.DLPack(dlpack.Request{})
				if err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
		// The bridge, Go to Go (dlpack.From): no copy.
		b.Run("bridge-FromTensor-From/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				e, err := dlgomlx.FromTensor(x)
				if err != nil {
					b.Fatal(err)
				}
				f, err := dlpack.From(e)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		// GoMLX's own way out: ConstFlatData, copied into a Go slice.
		b.Run("gomlx-ConstFlatData-copy/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				out, err := tensors.CopyFlatData[float32](x)
				if err != nil || len(out) != s.n {
					b.Fatal(err)
				}
			}
		})
		// The bridge's explicit copy.
		b.Run("bridge-CopyFromTensor/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				if _, err := dlgomlx.CopyFromTensor(x); err != nil {
					b.Fatal(err)
				}
			}
		})
		x.MustFinalizeAll()
	}
}

// Into GoMLX: a producer's tensor (a Go slice) made a tensor an
// execution on simplego reads.
func BenchmarkIn(b *testing.B) {
	be := newBackend(b)
	for _, s := range benchSizes {
		data := make([]float32, s.n)
		arr := dlpack.NewArray(data, []int64{int64(s.n)})
		// The bridge: one copy, into a simplego shared buffer.
		b.Run("bridge-ToTensor-simplego/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				t, err := dlgomlx.ToTensor(arr, be)
				if err != nil {
					b.Fatal(err)
				}
				t.MustFinalizeAll()
			}
		})
		// GoMLX's own way in: FromFlatDataAndDimensions (one copy, into a
		// local tensor)...
		b.Run("gomlx-FromFlatDataAndDimensions/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				t := tensors.FromFlatDataAndDimensions(data, s.n)
				t.MustFinalizeAll()
			}
		})
		// ...which an execution then copies into a shared buffer.
		b.Run("gomlx-FromFlatDataAndDimensions+device/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				t := tensors.FromFlatDataAndDimensions(data, s.n)
				if err := t.MaterializeOnDevice(be, true, 0); err != nil {
					b.Fatal(err)
				}
				t.MustFinalizeAll()
			}
		})
		// The bridge, a FromTensor export coming back: no copy.
		x := tensors.FromFlatDataAndDimensions(data, s.n)
		e, err := dlgomlx.FromTensor(x)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("bridge-ToTensor-export/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n * 4))
			for b.Loop() {
				if t, err := dlgomlx.ToTensor(e, be); err != nil || t != x {
					b.Fatal(err)
				}
			}
		})
		x.MustFinalizeAll()
	}
}
