//go:build unix

package dlarrow_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

// writeIPC writes one record batch of the given columns to an Arrow IPC
// file and returns its path.
func writeIPC(t *testing.T, fields []arrow.Field, cols []arrow.Array) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.arrow")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
	defer rec.Release()
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readColumn reads column 0 of the file back through OpenFile and
// FromField, and returns its shape and elements in row-major order.
func readColumn(t *testing.T, path string) ([]int64, []float32) {
	t.Helper()
	af, err := dlarrow.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	col, err := af.Column(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	f, err := dlpack.From(col)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := dlpack.ViewOf[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, v.Len())
	if _, err := v.CopyTo(xs); err != nil {
		t.Fatal(err)
	}
	return f.Shape(), xs
}

// ToField shares the tensor's memory as N rows of a fixed_shape_tensor
// column, and the file written from it reads back through FromField with
// the same shape and elements; the array's release closes the Foreign.
func TestToFieldRoundTrip(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	f, err := dlpack.From(dlpack.NewArray(xs, []int64{2, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	field, arr, err := dlarrow.ToField("x", f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	if arr.Len() != 2 || arr.DataType().String() != "fixed_size_list<item: float32, nullable>[6]" {
		t.Errorf("array %s of %d rows, want 2 rows of fixed_size_list[6]", arr.DataType(), arr.Len())
	}
	if name, _ := field.Metadata.GetValue("ARROW:extension:name"); name != dlarrow.FixedShapeTensorName {
		t.Errorf("extension name %q", name)
	}
	if meta, _ := field.Metadata.GetValue("ARROW:extension:metadata"); meta != `{"shape":[2,3]}` {
		t.Errorf("extension metadata %q", meta)
	}
	values := arr.Data().Children()[0].Buffers()[1].Bytes()
	if unsafe.Pointer(&values[0]) != unsafe.Pointer(&xs[0]) {
		t.Error("ToField copied the data")
	}
	path := writeIPC(t, []arrow.Field{field}, []arrow.Array{arr})
	arr.Release()
	if !f.Closed() {
		t.Error("the array's release did not close the Foreign")
	}
	shape, got := readColumn(t, path)
	if !slices.Equal(shape, []int64{2, 2, 3}) || !slices.Equal(got, xs) {
		t.Errorf("read back %v %v, want [2 2 3] %v", shape, got, xs)
	}
}

// CopyToField copies a strided tensor in row-major order; ToField refuses
// it; 0-d, bool and complex tensors and empty rows are refused by both.
func TestCopyToFieldAndRefusals(t *testing.T) {
	mem := checked(t)
	// a (2, 3) view of a column-major buffer: element (i, j) at i + 2j
	colMajor := &dlpack.Array[float32]{Data: []float32{1, 4, 2, 5, 3, 6}, Shape: []int64{2, 3}, Strides: []int64{1, 2}}
	f, err := dlpack.From(colMajor)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := dlarrow.ToField("x", f); !errors.Is(err, dlpack.ErrLayout) {
		t.Errorf("ToField of a strided tensor: %v, want ErrLayout", err)
	}
	field, arr, err := dlarrow.CopyToField("x", f, mem)
	if err != nil {
		t.Fatal(err)
	}
	path := writeIPC(t, []arrow.Field{field}, []arrow.Array{arr})
	arr.Release()
	shape, got := readColumn(t, path)
	if !slices.Equal(shape, []int64{2, 3}) || !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("read back %v %v, want [2 3] [1 2 3 4 5 6]", shape, got)
	}

	for _, c := range []struct {
		name string
		src  dlpack.Source
		want error
	}{
		{"0-d", &dlpack.Array[float32]{Data: []float32{1}, Shape: []int64{}}, dlpack.ErrShape},
		{"empty rows", &dlpack.Array[float32]{Shape: []int64{1, 0, 3}}, dlpack.ErrShape},
		{"bool", dlpack.NewArray([]bool{true, false}, []int64{2}), dlarrow.ErrType},
		{"complex", dlpack.NewArray([]complex64{1}, []int64{1}), dlarrow.ErrType},
	} {
		g, err := dlpack.From(c.src.(dlpack.Producer))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := dlarrow.ToField("x", g); !errors.Is(err, c.want) {
			t.Errorf("ToField(%s): %v, want %v", c.name, err, c.want)
		}
		if _, _, err := dlarrow.CopyToField("x", g, mem); !errors.Is(err, c.want) {
			t.Errorf("CopyToField(%s): %v, want %v", c.name, err, c.want)
		}
		g.Close()
	}

}
