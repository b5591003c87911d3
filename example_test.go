//go:build cgo

package dlpack_test

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Lend a Go slice to a consumer. Here the consumer is Go itself; a C
// consumer gets (*C.DLManagedTensorVersioned)(unsafe.Pointer(m)) and calls
// its deleter when done.
func ExampleExport() {
	xs := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{2, 3})
	if err != nil {
		panic(err)
	}
	fmt.Println("version", m.Version, "ndim", m.DLTensor.NDim, "dtype", m.DLTensor.DType)
	fmt.Println("zero copy:", m.DLTensor.Data == uintptr(unsafe.Pointer(&xs[0])))
	fmt.Println("outstanding:", dlpack.Outstanding())

	f, _ := dlpack.Import(unsafe.Pointer(m)) // the consumer, done at once
	f.Close()
	fmt.Println("outstanding:", dlpack.Outstanding())
	// Output:
	// version 1.3 ndim 2 dtype float32
	// zero copy: true
	// outstanding: 1
	// outstanding: 0
}

// A consumer that only knows the pre-1.0 struct. Legacy tensors carry no
// read-only flag, so importers treat them as read-only unless told.
func ExampleExportLegacy() {
	m, err := dlpack.ExportLegacy([]int32{1, 2, 3}, []int64{3})
	if err != nil {
		panic(err)
	}
	f, _ := dlpack.ImportLegacy(unsafe.Pointer(m))
	defer f.Close()
	fmt.Println(f, "legacy:", f.Legacy())
	_, err = dlpack.Slice[int32](f)
	fmt.Println(errors.Is(err, dlpack.ErrReadOnly))
	// Output:
	// int32[3] cpu strides [1] read-only legacy: true
	// true
}

// Import a tensor and view it. p would come from C; here it is an export.
func ExampleImport() {
	m, _ := dlpack.Export([]float64{1, 2, 3, 4}, []int64{2, 2})
	p := unsafe.Pointer(m)

	f, err := dlpack.Import(p, dlpack.RequireDataType(dlpack.Float64))
	if err != nil {
		panic(err) // p has been released
	}
	defer f.Close()
	xs, _ := dlpack.Slice[float64](f)
	fmt.Println(f.Shape(), f.Strides(), xs)
	// Output: [2 2] [2 1] [1 2 3 4]
}

// Errors name the field and value and wrap a sentinel.
func ExampleFieldError() {
	_, err := dlpack.Export([]float32{1, 2, 3}, []int64{2, 2})
	fmt.Println(errors.Is(err, dlpack.ErrShape))
	var fe *dlpack.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field, fe.Value)
	}
	// Output:
	// true
	// shape [2 2]
}

// Borrow a tensor for the duration of a function: no allocation, released
// when the function returns.
func ExampleBorrow() {
	m, _ := dlpack.Export([]int16{5, 6, 7}, []int64{3})
	sum := 0
	err := dlpack.Borrow(unsafe.Pointer(m), func(f dlpack.Foreign) error {
		xs, err := dlpack.Slice[int16](f)
		for _, x := range xs {
			sum += int(x)
		}
		return err
	})
	fmt.Println(sum, err, dlpack.Outstanding())
	// Output: 18 <nil> 0
}

// A strided view: a reversed, broadcast layout read element by element.
func ExampleBorrowBatch() {
	// Three tensors handed over at once (exports of Go slices here; from a
	// C producer in practice). fs is reusable storage for the handles.
	ps := make([]unsafe.Pointer, 3)
	for i := range ps {
		m, _ := dlpack.Export([]float64{float64(i), 10}, []int64{2})
		ps[i] = unsafe.Pointer(m)
	}
	fs := make([]dlpack.Foreign, len(ps))
	total := 0.0
	err := dlpack.BorrowBatch(ps, fs, func(fs []dlpack.Foreign) error {
		for _, f := range fs {
			xs, err := dlpack.Slice[float64](f)
			if err != nil {
				return err
			}
			total += xs[0] + xs[1]
		}
		return nil
	})
	fmt.Println(total, err, fs[0].Closed(), dlpack.Outstanding())
	// Output: 33 <nil> true 0
}

func ExampleViewOf() {
	xs := []float64{0, 1, 2, 3, 4, 5}
	m, _ := dlpack.Export(xs, []int64{3, 2}, dlpack.WithStrides(-2, 0), dlpack.WithOffset(4))
	f, _ := dlpack.Import(unsafe.Pointer(m))
	defer f.Close()
	v, _ := dlpack.ViewOf[float64](f)
	for i, x := range v.All() {
		if i > 0 {
			fmt.Print(" ")
		}
		fmt.Print(i, ":", x)
	}
	fmt.Println()
	x, _ := v.At(2, 1)
	fmt.Println(x)
	// Output:
	// 0:4 1:4 2:2 3:2 4:0 5:0
	// 0
}

// Read-only data stays read-only: Slice refuses, ReadOnlySlice reads.
func ExampleReadOnlySlice() {
	m, _ := dlpack.Export([]uint8{1, 2}, []int64{2}, dlpack.ReadOnly())
	f, _ := dlpack.Import(unsafe.Pointer(m))
	defer f.Close()
	_, err := dlpack.Slice[uint8](f)
	fmt.Println(err)
	xs, _ := dlpack.ReadOnlySlice[uint8](f)
	fmt.Println(xs)
	// Output:
	// dlpack: tensor is read-only: flags = READ_ONLY (the producer set READ_ONLY)
	// [1 2]
}

// A BLAS-style window (row stride 3 over 2 columns) as one slice.
func ExampleSpan() {
	m, _ := dlpack.Export([]float32{1, 2, 0, 3, 4, 0}, []int64{2, 2}, dlpack.WithStrides(3, 1))
	f, _ := dlpack.Import(unsafe.Pointer(m))
	defer f.Close()
	xs, _ := dlpack.Span[float32](f)
	fmt.Println(xs, f.Stride(0))
	// Output: [1 2 0 3 4] 3
}

// Memory outside the Go heap, lent with a pure-C deleter.
func ExampleNewBuffer() {
	b, err := dlpack.NewBuffer[float32]([]int64{2, 2})
	if err != nil {
		panic(err)
	}
	copy(b.Data(), []float32{1, 2, 3, 4})
	m, _ := b.Export(nil)
	b.Close() // the consumer still holds the memory
	f, _ := dlpack.Import(unsafe.Pointer(m))
	xs, _ := dlpack.Slice[float32](f)
	fmt.Println(xs, f.DataAddr()%256 == 0)
	f.Close()
	fmt.Println(dlpack.Outstanding())
	// Output:
	// [1 2 3 4] true
	// 0
}

// Allocate through an exchange table: here this package's own.
func ExampleOpenExchangeAPI() {
	c, err := dlpack.OpenExchangeAPI(unsafe.Pointer(dlpack.PublishedExchangeAPI()))
	if err != nil {
		panic(err)
	}
	f, err := c.Allocate(dlpack.Int64, []int64{2, 3}, dlpack.CPUDevice)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Println(c.Version(), f)
	// Output: 1.3 int64[2 3] cpu strides [3 1]
}

func ExampleParseDataType() {
	for _, s := range []string{"bfloat16", "float8_e4m3fn", "int8x4"} {
		dt, _ := dlpack.ParseDataType(s)
		fmt.Println(dt.Code, dt.Bits, dt.Lanes, dt.ItemSize(), dt.Validate() == nil)
	}
	// Output:
	// bfloat16 16 1 2 true
	// float8_e4m3fn 8 1 1 true
	// int 8 4 4 true
}

func ExampleParseDevice() {
	d, _ := dlpack.ParseDevice("cuda:1")
	fmt.Println(d.Type, d.ID, d.Type.HostAccessible(), d)
	// Output: cuda 1 false cuda:1
}

func ExampleDataTypeOf() {
	fmt.Println(dlpack.DataTypeOf[complex64](), dlpack.DataTypeOf[bool]())
	// Output: complex64 bool
}

// A Go consumer takes any producer with From; a Go producer (here an
// Array) is taken Go to Go, without C.
func ExampleFrom() {
	a := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	f, err := dlpack.From(a)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	xs, _ := dlpack.Slice[float32](f)
	fmt.Println(f.Shape(), xs, "shared:", &xs[0] == &a.Data[0])
	// Output:
	// [2 3] [1 2 3 4 5 6] shared: true
}

// A type that describes its memory is a producer: here a matrix whose
// rows are padded, handed out with its row stride.
type paddedMatrix struct {
	rows, cols, stride int
	data               []float64
}

func (m *paddedMatrix) DescribeTensor(d *dlpack.Description) error {
	dlpack.DescribeSlice(d, m.data)
	d.Shape = []int64{int64(m.rows), int64(m.cols)}
	d.Strides = []int64{int64(m.stride), 1}
	d.Owner = m // kept reachable until the last consumer is done
	return nil
}

func (m *paddedMatrix) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

func (m *paddedMatrix) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(m, req)
}

func ExampleProduce() {
	m := &paddedMatrix{rows: 2, cols: 2, stride: 3, data: []float64{1, 2, 0, 3, 4, 0}}
	// A consumer that reads the pre-1.0 ABI gets a legacy tensor.
	t, err := m.DLPack(dlpack.Request{Legacy: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("legacy:", t.IsLegacy(), "strides:", unsafe.Slice(t.Legacy.DLTensor.Strides, 2))
	t.Close() // what the consumer does when done
	// A legacy consumer that forbids copies, asking for read-only data it
	// cannot be told is read-only, is refused.
	ro := &dlpack.Array[float64]{Data: m.data, Shape: []int64{6}, ReadOnly: true}
	_, err = ro.DLPack(dlpack.Request{Legacy: true, Copy: dlpack.CopyNever})
	fmt.Println(errors.Is(err, dlpack.ErrReadOnly))
	fmt.Println("outstanding:", dlpack.Outstanding())
	// Output:
	// legacy: true strides: [3 1]
	// true
	// outstanding: 0
}
