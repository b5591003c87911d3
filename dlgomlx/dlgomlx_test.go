//go:build cgo

package dlgomlx_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/x448/float16"
)

var allDTypes = []dtypes.DType{dtypes.Bool, dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64,
	dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64, dtypes.Float16, dtypes.BFloat16,
	dtypes.Float32, dtypes.Float64, dtypes.Complex64, dtypes.Complex128}

// Shapes of rank 0 to 8, zero-size ones included.
var allShapes = [][]int{{}, {0}, {5}, {3, 0}, {2, 3}, {2, 1, 3}, {2, 2, 2, 3}, {1, 2, 1, 2, 3},
	{2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 2}, {2, 1, 1, 2, 1, 1, 2, 3}, {2, 2, 0, 2, 2, 2, 2, 2}}

// Every dtype both sides have, every rank to 8, zero-size included: a
// GoMLX tensor goes out sharing its memory (same address, read-only),
// bit for bit; a C producer's tensor comes in bit for bit, on simplego
// and as a local tensor, and the producer's deleter runs once.
func TestEveryDTypeAndRank(t *testing.T) {
	b := newBackend(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, gt := range allDTypes {
		dt, ok := dlgomlx.DataType(gt)
		if !ok {
			t.Fatalf("%s not carried", gt)
		}
		if back, ok := dlgomlx.DType(dt); !ok || back != gt {
			t.Fatalf("DType(%s) = %s, %v", dt, back, ok)
		}
		for _, dims := range allShapes {
			raw := randomBytes(r, sizeOf(dims)*gt.Size(), gt)
			x := localTensor(t, gt, raw, dims...)
			before := dlgomlx.ReadStats()
			e, err := dlgomlx.FromTensor(x)
			if err != nil {
				t.Fatal(gt, dims, err)
			}
			f, err := dlpack.From(e)
			if err != nil {
				t.Fatal(gt, dims, err)
			}
			if f.DataType() != dt || !slices.Equal(f.Shape(), dims64(dims)) || f.Writable() || !f.IsContiguous() {
				t.Fatalf("%s %v: got %s %v writable %v", gt, dims, f.DataType(), f.Shape(), f.Writable())
			}
			if got := foreignBytes(t, f); !bytes.Equal(got, raw) {
				t.Fatalf("%s %v: exported bytes differ", gt, dims)
			}
			if len(raw) > 0 && f.DataAddr() != addrOf(t, x) {
				t.Fatalf("%s %v: export at %#x, tensor at %#x: not shared", gt, dims, f.DataAddr(), addrOf(t, x))
			}
			if dlgomlx.Exports(x) != 1 {
				t.Fatalf("Exports = %d, want 1", dlgomlx.Exports(x))
			}
			f.Close()
			if dlgomlx.Exports(x) != 0 {
				t.Fatalf("Exports after Close = %d", dlgomlx.Exports(x))
			}
			after := dlgomlx.ReadStats()
			if after.Shared-before.Shared != 1 || after.Copies != before.Copies {
				t.Fatalf("%s %v: stats %+v -> %+v: want one share, no copy", gt, dims, before, after)
			}

			// In, from C memory, on simplego and local.
			for _, backend := range []any{b, nil} {
				ct := cTensor(dt, dims64(dims), nil, raw, 0)
				cf, err := dlpack.Import(ct.Ptr)
				if err != nil {
					t.Fatal(err)
				}
				var y *tensors.Tensor
				if backend == nil {
					y, err = dlgomlx.ToTensor(cf, nil)
				} else {
					y, err = dlgomlx.ToTensor(cf, b)
				}
				if err != nil {
					t.Fatal(gt, dims, err)
				}
				cf.Close()
				if ct.Deletes() != 1 {
					t.Fatalf("deleter ran %d times", ct.Deletes())
				}
				if y.DType() != gt || !slices.Equal(y.Shape().Dimensions, dims) && len(dims) > 0 {
					t.Fatalf("%s %v: got %s", gt, dims, y.Shape())
				}
				if got := bytesOf(t, y); !bytes.Equal(got, raw) {
					t.Fatalf("%s %v: imported bytes differ", gt, dims)
				}
				if err := y.FinalizeAll(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// GoMLX's float16 (x448/float16) and bfloat16 have the bit layouts of
// package minifloat's, checked over every pattern, and pass the bridge
// unchanged both ways.
func TestHalfFloatLayouts(t *testing.T) {
	same := func(a, b float32) bool { return a == b || (math.IsNaN(float64(a)) && math.IsNaN(float64(b))) }
	h := make([]float16.Float16, 1<<16)
	bf := make([]bfloat16.BFloat16, 1<<16)
	for i := range 1 << 16 {
		h[i], bf[i] = float16.Frombits(uint16(i)), bfloat16.FromBits(uint16(i))
		if !same(h[i].Float32(), minifloat.Float16(i).Float32()) {
			t.Fatalf("float16 %#04x: x448 %v, minifloat %v", i, h[i].Float32(), minifloat.Float16(i).Float32())
		}
		if !same(bf[i].Float32(), minifloat.BFloat16(i).Float32()) {
			t.Fatalf("bfloat16 %#04x: gomlx %v, minifloat %v", i, bf[i].Float32(), minifloat.BFloat16(i).Float32())
		}
	}
	check := func(x *tensors.Tensor, dt dlpack.DataType) {
		e, err := dlgomlx.FromTensor(x)
		if err != nil {
			t.Fatal(err)
		}
		f, err := dlpack.From(e)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.DataType() != dt {
			t.Fatalf("data type %s, want %s", f.DataType(), dt)
		}
		var bits []uint16
		if dt == dlpack.Float16 {
			v, _ := dlpack.ReadOnlySlice[minifloat.Float16](f)
			for _, x := range v {
				bits = append(bits, uint16(x))
			}
		} else {
			v, _ := dlpack.ReadOnlySlice[minifloat.BFloat16](f)
			for _, x := range v {
				bits = append(bits, uint16(x))
			}
		}
		for i, x := range bits {
			if x != uint16(i) {
				t.Fatalf("%s element %d has bits %#04x", dt, i, x)
			}
		}
		back, err := dlgomlx.CopyToTensor(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !back.Equal(x) && dt == dlpack.BFloat16 {
			// NaNs compare unequal; compare bits.
			if !bytes.Equal(bytesOf(t, back), bytesOf(t, x)) {
				t.Fatal("bfloat16 round trip changed bits")
			}
		}
		if !bytes.Equal(bytesOf(t, back), bytesOf(t, x)) {
			t.Fatalf("%s round trip changed bits", dt)
		}
	}
	check(tensors.FromFlatDataAndDimensions(h, 1<<16), dlpack.Float16)
	check(tensors.FromFlatDataAndDimensions(bf, 1<<16), dlpack.BFloat16)
}

// Strided producers (transposed, reversed, broadcast, misaligned) are
// copied into GoMLX's row-major layout, on simplego, locally, and through
// a device upload (which stages them first).
func TestStridedProducers(t *testing.T) {
	b := newBackend(t)
	dev := deviceOnly{b}
	// A 3x4 int32 source holding 0..11 in C memory.
	src := make([]byte, 12*4)
	for i := range 12 {
		src[4*i] = byte(i)
	}
	cases := []struct {
		name    string
		shape   []int64
		strides []int64
		offset  uint64 // in elements
		shift   int
		want    []int32
	}{
		{"transpose", []int64{4, 3}, []int64{1, 4}, 0, 0, []int32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"reversed rows", []int64{3, 4}, []int64{-4, 1}, 8, 0, []int32{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}},
		{"every other column", []int64{3, 2}, []int64{4, 2}, 0, 0, []int32{0, 2, 4, 6, 8, 10}},
		{"broadcast row", []int64{2, 4}, []int64{0, 1}, 4, 0, []int32{4, 5, 6, 7, 4, 5, 6, 7}},
		{"misaligned compact", []int64{3, 4}, nil, 0, 1, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	}
	for _, c := range cases {
		for _, target := range []string{"simplego", "local", "device"} {
			ct := cshim.Make(cshim.Spec{Major: 1, Minor: 1, DeviceType: 1, NDim: int32(len(c.shape)), Code: 0, Bits: 32, Lanes: 1,
				Shape: c.shape, Strides: c.strides, ByteOffset: c.offset * 4, Data: src, DataShift: c.shift})
			f, err := dlpack.Import(ct.Ptr)
			if err != nil {
				t.Fatal(c.name, err)
			}
			before := dlgomlx.ReadStats()
			var y *tensors.Tensor
			switch target {
			case "simplego":
				y, err = dlgomlx.ToTensor(f, b)
			case "local":
				y, err = dlgomlx.ToTensor(f, nil)
			default:
				y, err = dlgomlx.ToTensor(f, dev)
			}
			f.Close()
			if err != nil {
				t.Fatal(c.name, target, err)
			}
			if ct.Deletes() != 1 {
				t.Fatalf("%s: deleter ran %d times", c.name, ct.Deletes())
			}
			got := tensors.MustCopyFlatData[int32](y)
			if !slices.Equal(got, c.want) {
				t.Fatalf("%s on %s: got %v, want %v", c.name, target, got, c.want)
			}
			copies := dlgomlx.ReadStats().Copies - before.Copies
			want := int64(1)
			if target == "device" && (c.strides != nil || c.shift != 0) {
				want = 2 // compact staging copy, then the upload
			}
			if copies != want {
				t.Fatalf("%s on %s: %d copies, want %d", c.name, target, copies, want)
			}
			y.MustFinalizeAll()
		}
	}
}

// The whole path on simplego: a tensor taken by ToTensor is one copy,
// and executing a graph on it copies nothing more (it stays in the same
// buffer, with no local copy); the result goes out with no copy (the
// export is at the result's address); a FromTensor export comes back as
// the tensor itself, and CopyToTensor copies it.
func TestSimplegoSharesBothWays(t *testing.T) {
	b := newBackend(t)
	in := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	before := dlgomlx.ReadStats()
	x, err := dlgomlx.ToTensor(in, b)
	if err != nil {
		t.Fatal(err)
	}
	addr := addrOf(t, x)
	exec, err := graph.NewExec(b, func(x *graph.Node) *graph.Node { return graph.MulScalar(x, 2) })
	if err != nil {
		t.Fatal(err)
	}
	y, err := exec.Exec1(x)
	if err != nil {
		t.Fatal(err)
	}
	if addrOf(t, x) != addr || x.HasLocal() {
		t.Fatal("the execution moved or copied its input")
	}
	e, err := dlgomlx.FromTensor(y)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.From(e)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataAddr() != addrOf(t, y) || e.Copied() {
		t.Fatal("the result was not shared")
	}
	got, _ := dlpack.ReadOnlySlice[float32](f)
	if !slices.Equal(got, []float32{2, 4, 6, 8, 10, 12}) {
		t.Fatalf("result %v", got)
	}
	f.Close()
	s := dlgomlx.ReadStats()
	if s.Copies-before.Copies != 1 || s.Shared-before.Shared != 1 || s.CopiedBytes-before.CopiedBytes != 24 {
		t.Fatalf("stats %+v -> %+v: want 1 copy of 24 bytes and 1 share", before, s)
	}
	back, err := dlgomlx.ToTensor(e, b)
	if err != nil || back != y {
		t.Fatalf("ToTensor of an export: %v, same tensor %v", err, back == y)
	}
	cp, err := dlgomlx.CopyToTensor(e, b)
	if err != nil || cp == y || addrOf(t, cp) == addrOf(t, y) || !cp.Equal(y) {
		t.Fatalf("CopyToTensor of an export: %v", err)
	}
	cp.MustFinalizeAll()
	x.MustFinalizeAll()
	y.MustFinalizeAll()
}

// A tensor that lives only on a device (simplego with its shared buffers
// hidden, as XLA on a GPU) goes out through GoMLX's own transfer: one
// copy, FlagIsCopied, writable, and the tensor gains no local copy.
func TestDeviceOnlyTensorIsCopiedOnce(t *testing.T) {
	b := deviceOnly{newBackend(t)}
	before := dlgomlx.ReadStats()
	x, err := dlgomlx.ToTensor(dlpack.NewArray([]int64{1, 2, 3}, []int64{3}), b)
	if err != nil {
		t.Fatal(err)
	}
	if x.IsLocal() || !x.IsOnDevice(0) {
		t.Fatal("the upload left a local copy")
	}
	if d := dlgomlx.ReadStats().Copies - before.Copies; d != 1 {
		t.Fatalf("the upload from compact aligned memory made %d copies, want 1", d)
	}
	before = dlgomlx.ReadStats()
	e, err := dlgomlx.FromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Copied() || x.IsLocal() {
		t.Fatalf("Copied %v, tensor local %v", e.Copied(), x.IsLocal())
	}
	if d := dlgomlx.ReadStats().Copies - before.Copies; d != 1 {
		t.Fatalf("%d copies, want 1", d)
	}
	m, err := e.DLPack(dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.IsCopied() || !f.Writable() {
		t.Fatalf("flags %s", f.Flags())
	}
	v, err := dlpack.Slice[int64](f)
	if err != nil || !slices.Equal(v, []int64{1, 2, 3}) {
		t.Fatalf("%v %v", v, err)
	}
	v[0] = 100 // the copy is the consumer's
	if got := tensors.MustCopyFlatData[int64](x); got[0] != 1 {
		t.Fatal("a write to the copy reached the tensor")
	}
	x.MustFinalizeAll()
}

// CopyFromTensor: new memory, writable, FlagIsCopied; the tensor may be
// finalized at once.
func TestCopyFromTensor(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions([]float64{1, 2, 3, 4}, 2, 2)
	e, err := dlgomlx.CopyFromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	x.MustFinalizeAll()
	m, err := e.DLPack(dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := dlpack.Slice[float64](f)
	if err != nil || !slices.Equal(v, []float64{1, 2, 3, 4}) || !f.IsCopied() {
		t.Fatalf("%v %v copied %v", v, err, f.IsCopied())
	}
	if f.DataAddr()%256 != 0 {
		t.Fatalf("copy at %#x is not 256-byte aligned", f.DataAddr())
	}
}

// Bad input gets an error wrapping a sentinel, and a refused producer's
// tensor is still released once.
func TestErrors(t *testing.T) {
	if _, err := dlgomlx.FromTensor(nil); !errors.Is(err, dlgomlx.ErrTensor) {
		t.Fatalf("nil tensor: %v", err)
	}
	x := tensors.FromValue([]float32{1})
	x.MustFinalizeAll()
	if _, err := dlgomlx.FromTensor(x); !errors.Is(err, dlgomlx.ErrTensor) {
		t.Fatalf("finalized tensor: %v", err)
	}
	if _, err := dlgomlx.CopyFromTensor(x); !errors.Is(err, dlgomlx.ErrTensor) {
		t.Fatalf("finalized tensor: %v", err)
	}
	if _, err := dlgomlx.ToTensor(nil, nil); !errors.Is(err, dlpack.ErrNilPointer) {
		t.Fatalf("nil producer: %v", err)
	}
	for _, c := range []struct {
		name string
		spec cshim.Spec
		want error
	}{
		{"float8", cshim.Spec{Major: 1, Minor: 1, DeviceType: 1, NDim: 1, Code: uint8(dlpack.Float8E4M3FN.Code), Bits: 8, Lanes: 1, Shape: []int64{4}, Data: make([]byte, 4)}, dlpack.ErrDataType},
		{"lanes", cshim.Spec{Major: 1, Minor: 1, DeviceType: 1, NDim: 1, Code: 2, Bits: 32, Lanes: 4, Shape: []int64{2}, Data: make([]byte, 32)}, dlpack.ErrDataType},
		{"cuda", cshim.Spec{Major: 1, Minor: 1, DeviceType: 2, NDim: 1, Code: 2, Bits: 32, Lanes: 1, Shape: []int64{2}, DataAddr: 0x10000}, dlpack.ErrDevice},
	} {
		ct := cshim.Make(c.spec)
		f, err := dlpack.Import(ct.Ptr)
		if err != nil {
			t.Fatal(c.name, err)
		}
		_, err = dlgomlx.ToTensor(f, nil)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
		f.Close()
		if ct.Deletes() != 1 {
			t.Fatalf("%s: deleter ran %d times", c.name, ct.Deletes())
		}
	}
	// Bool bytes other than 0 and 1 become true.
	ct := cTensor(dlpack.Bool, []int64{4}, nil, []byte{0, 1, 2, 255}, 0)
	f, _ := dlpack.Import(ct.Ptr)
	y, err := dlgomlx.ToTensor(f, nil)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[bool](y); !slices.Equal(got, []bool{false, true, true, true}) || !bytes.Equal(bytesOf(t, y), []byte{0, 1, 1, 1}) {
		t.Fatalf("bools %v", got)
	}
}
