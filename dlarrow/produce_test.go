//go:build cgo

package dlarrow_test

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/internal/cshim"
)

// A C consumer reads the shared buffer; deleters run on C threads after Go
// has released everything; the allocator is back to zero.
func TestProduceToCThreads(t *testing.T) {
	mem := checked(t)
	full := fromJSON(t, mem, arrow.PrimitiveTypes.Float64, "[100, 1, 2, 3, 4]")
	arr := array.NewSlice(full, 1, 5)
	full.Release()
	var ptrs []unsafe.Pointer
	for range 8 {
		m, err := produce(arr, dlpack.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Versioned.Flags&dlpack.FlagReadOnly == 0 || m.Versioned.Flags&dlpack.FlagIsCopied != 0 {
			t.Errorf("flags %v, want read-only, not copied", m.Versioned.Flags)
		}
		if got, want := uintptr(m.Versioned.DLTensor.Data)+uintptr(m.Versioned.DLTensor.ByteOffset), valuesAddr(arr, 0, 8); got != want {
			t.Errorf("C sees data at %#x, want %#x", got, want)
		}
		if s := cshim.SumVersioned(m.Pointer()); s != 10 {
			t.Errorf("C sum %v, want 10", s)
		}
		ptrs = append(ptrs, m.Pointer())
	}
	arr.Release()
	if mem.CurrentAlloc() == 0 {
		t.Fatal("the buffer was freed while C held it")
	}
	cshim.ReleaseOnThreads(ptrs, 4, false)
	if n := dlpack.Outstanding(); n != 0 {
		t.Errorf("outstanding %d", n)
	}
}

func TestProduceRequests(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Int32, "[1, 2, 3]")
	defer arr.Release()
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	shared := valuesAddr(arr, 0, 4)

	// legacy: cannot say read-only, so a copy
	m, err := tn.DLPack(dlpack.Request{Legacy: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Legacy == nil || uintptr(m.Legacy.DLTensor.Data) == shared {
		t.Errorf("legacy request: %+v shares the buffer", m)
	}
	m.Close()
	// ... and refused when copies are forbidden
	if _, err := tn.DLPack(dlpack.Request{Legacy: true, Copy: dlpack.CopyNever}); err == nil {
		t.Error("legacy with CopyNever: no error")
	}
	// writable: a copy
	req := dlpack.Request{}
	req.Writable = true
	m, err = tn.DLPack(req)
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(m.Versioned.DLTensor.Data) == shared || m.Versioned.Flags&dlpack.FlagReadOnly != 0 {
		t.Errorf("writable request: shares %v, flags %v", uintptr(m.Versioned.DLTensor.Data) == shared, m.Versioned.Flags)
	}
	m.Close()
	req.Copy = dlpack.CopyNever
	if _, err := tn.DLPack(req); !errors.Is(err, dlpack.ErrReadOnly) {
		t.Errorf("writable with CopyNever: %v", err)
	}
	// copy=True
	req = dlpack.Request{}
	req.Copy = dlpack.CopyAlways
	m, err = tn.DLPack(req)
	if err != nil {
		t.Fatal(err)
	}
	if m.Versioned.Flags&dlpack.FlagIsCopied == 0 {
		t.Errorf("CopyAlways: flags %v", m.Versioned.Flags)
	}
	m.Close()
	// a device the array is not on
	req = dlpack.Request{}
	req.Device = dlpack.Device{Type: dlpack.CUDA}
	if _, err := tn.DLPack(req); !errors.Is(err, dlpack.ErrDevice) {
		t.Errorf("CUDA request: %v", err)
	}
	if n := dlpack.Outstanding(); n != 0 {
		t.Errorf("outstanding %d", n)
	}
}

// Go to Go: dlpack.From takes the tensor without a C block.
func TestFromGoToGo(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), "[[1, 2], [3, 4], [5, 6]]")
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dlpack.From(tn)
	if err != nil {
		t.Fatal(err)
	}
	tn.Close()
	arr.Release()
	xs, err := dlpack.ReadOnlySlice[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 6 || xs[5] != 6 || f.Writable() || f.Shape()[1] != 2 {
		t.Errorf("got %v writable %v shape %v", xs, f.Writable(), f.Shape())
	}
	if _, err := dlpack.Slice[float32](f); !errors.Is(err, dlpack.ErrReadOnly) {
		t.Errorf("writable slice of Arrow memory: %v", err)
	}
	f.Close()
	if _, err := dlpack.From(tn); !errors.Is(err, dlpack.ErrClosed) {
		t.Errorf("From a released Tensor: %v", err)
	}
}

// Round trip: Arrow -> DLPack -> Arrow shares the one buffer, and the
// lifetimes chain: the second array keeps the first alive.
func TestArrowRoundTrip(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Uint16, "[1, 2, 3]")
	m, err := produce(arr, dlpack.Request{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Import()
	if err != nil {
		t.Fatal(err)
	}
	back, err := dlarrow.ToArray(f)
	if err != nil {
		t.Fatal(err)
	}
	if valuesAddr(back, 0, 2) != valuesAddr(arr, 0, 2) || !array.Equal(arr, back) {
		t.Errorf("round trip %v -> %v", arr, back)
	}
	arr.Release()
	if back.(*array.Uint16).Value(2) != 3 {
		t.Error("value lost")
	}
	back.Release()
}

// Exports of one Tensor from many goroutines, released in any order: the
// array's count ends at zero (the race detector sees the Go side).
func TestConcurrentExports(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Float32, "[1, 2, 3, 4]")
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	arr.Release()
	done := make(chan error)
	for g := range 8 {
		go func() {
			for range 200 {
				if g%2 == 0 {
					m, err := tn.DLPack(dlpack.Request{})
					if err != nil {
						done <- err
						return
					}
					m.Close()
				} else {
					f, err := dlpack.From(tn)
					if err != nil {
						done <- err
						return
					}
					f.Close()
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	tn.Close()
}

// An empty array (no values buffer at all) answers every request: shared
// with a valid address, or copied for a legacy consumer.
func TestEmptyArrayEveryRequest(t *testing.T) {
	arr := array.NewData(arrow.PrimitiveTypes.Float64, 0, []*memory.Buffer{nil, nil}, nil, 0, 0)
	col := array.MakeFromData(arr)
	arr.Release()
	defer col.Release()
	for _, req := range []dlpack.Request{dlpack.Request{}, {}, {MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways}} {
		m, err := produce(col, req)
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		f, err := m.Import()
		if err != nil {
			t.Fatal(err)
		}
		if f.Len() != 0 || f.DataAddr() == 0 || f.DataAddr()%64 != 0 {
			t.Errorf("%+v: len %d at %#x", req, f.Len(), f.DataAddr())
		}
		f.Close()
	}
}

// TestRepeatedExportsOfOneTensor: a Tensor exported again and again pins
// its buffer once (from its second export) instead of per export; the
// buffer stays valid for C consumers after Go released the Tensor and the
// array and collections ran, and everything is released at the end.
func TestRepeatedExportsOfOneTensor(t *testing.T) {
	mem := checked(t)
	arr := fromJSON(t, mem, arrow.PrimitiveTypes.Float64, "[1, 2, 3, 4]")
	tn, err := dlarrow.FromArray(arr)
	if err != nil {
		t.Fatal(err)
	}
	arr.Release()
	var ptrs []unsafe.Pointer
	for range 16 {
		m, err := tn.DLPack(dlpack.Request{})
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, m.Pointer())
	}
	tn.Close()
	tn = nil
	for range 5 {
		_ = make([]byte, 1<<20)
		runtime.GC()
	}
	for i, p := range ptrs {
		if s := cshim.SumVersioned(p); s != 10 {
			t.Errorf("export %d: C sum %v, want 10", i, s)
		}
	}
	cshim.ReleaseOnThreads(ptrs, 4, false)
	if n := dlpack.Outstanding(); n != 0 {
		t.Errorf("outstanding %d", n)
	}
	runtime.GC() // the Tensor is unreachable now: its cleanup unpins the buffer
}
