//go:build cgo

package dlpack_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
)

// FuzzProduce hands an Array with arbitrary shape, strides, offset and
// length to both sides of the protocol. Invariants: no panic; a refusal
// wraps a sentinel and is the same for Produce and From; an accepted
// tensor reads, through a strided view, exactly the elements the Array's
// geometry names, whether shared (From, Produce) or copied (CopyAlways);
// nothing is outstanding afterwards.
func FuzzProduce(f *testing.F) {
	le := func(v ...int64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		return b
	}
	f.Add(uint16(6), le(2, 3), le(3, 1), 0, false, false)
	f.Add(uint16(12), le(3, 2), le(-4, 2), 8, true, true)
	f.Add(uint16(5), le(5), le(0), 4, false, true)
	f.Add(uint16(0), le(0, 7), []byte{}, 0, true, false)
	f.Add(uint16(4), le(1<<40, 1<<40), le(1, 1), 0, false, false)
	f.Fuzz(func(t *testing.T, n uint16, shapeB, strideB []byte, offset int, readOnly, legacy bool) {
		ndim := len(shapeB) / 8
		if ndim > 6 {
			ndim = 6
		}
		shape := make([]int64, ndim)
		for i := range shape {
			shape[i] = int64(binary.LittleEndian.Uint64(shapeB[8*i:]))
		}
		numel := int64(1)
		for _, d := range shape {
			if d > 0 && numel > (1<<16)/d {
				return // broadcast tensors this big are valid, but slow to walk
			}
			numel *= max(d, 0)
		}
		var strides []int64
		if len(strideB) >= 8*ndim && len(strideB) > 0 {
			strides = make([]int64, ndim)
			for i := range strides {
				strides[i] = int64(binary.LittleEndian.Uint64(strideB[8*i:]))
			}
		}
		if o := dlpack.Outstanding(); o != 0 {
			t.Fatalf("outstanding %d before the input", o)
		}
		data := make([]int32, int(n)%512)
		for i := range data {
			data[i] = int32(i)
		}
		a := &dlpack.Array[int32]{Data: data, Shape: shape, Strides: strides, Offset: offset, ReadOnly: readOnly}
		req := dlpack.Request{}
		if legacy {
			req = dlpack.Request{Legacy: true}
		}
		m, errP := a.DLPack(req)
		g, errF := dlpack.FromRequest(a, req)
		if (errP == nil) != (errF == nil) {
			m.Close()
			g.Close()
			t.Fatalf("Produce and From disagree: %v / %v", errP, errF)
		}
		if errP != nil {
			if !errors.Is(errP, dlpack.ErrShape) && !errors.Is(errP, dlpack.ErrStrides) && !errors.Is(errP, dlpack.ErrOverflow) {
				t.Fatalf("refusal wraps no geometry sentinel: %v", errP)
			}
			if o := dlpack.Outstanding(); o != 0 {
				t.Fatalf("outstanding %d after refusals %v / %v", o, errP, errF)
			}
			return
		}
		f, err := m.Import(dlpack.AssumeWritable())
		if err != nil {
			t.Fatalf("our own export refused: %v", err)
		}
		c, err := dlpack.FromRequest(a, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways})
		if err != nil {
			t.Fatalf("copy refused: %v", err)
		}
		defer f.Close()
		defer g.Close()
		defer c.Close()
		if readOnly && !legacy && (f.Writable() || g.Writable()) {
			t.Fatal("a read-only array became writable")
		}
		if !c.Writable() || !c.IsCopied() {
			t.Fatalf("a copy: writable %v, copied %v", c.Writable(), c.IsCopied())
		}
		for _, h := range []dlpack.Foreign{f, g, c} {
			v, err := dlpack.ViewOf[int32](h)
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			for _, x := range v.All() {
				want := data[elementIndex(k, shape, a.Strides, offset)]
				if x != want {
					t.Fatalf("element %d: %d, want %d", k, x, want)
				}
				k++
			}
			h.Close()
		}
		if dlpack.Outstanding() != 0 {
			t.Fatalf("outstanding %d", dlpack.Outstanding())
		}
		if dlpack.ReadStats().BufferExports != 0 {
			t.Fatalf("copies outstanding %d", dlpack.ReadStats().BufferExports)
		}
	})
}

// elementIndex is the index in Data of the k-th element (row-major order)
// of an Array's geometry.
func elementIndex(k int, shape, strides []int64, offset int) int {
	if strides == nil {
		return offset + k
	}
	idx := offset
	for d := len(shape) - 1; d >= 0; d-- {
		i := int64(k) % shape[d]
		k = int(int64(k) / shape[d])
		idx += int(i * strides[d])
	}
	return idx
}
