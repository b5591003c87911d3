// Command arrow reads an Arrow IPC file (Feather v2) through a memory map
// and hands one of its columns to a C consumer without copying: the C
// code reads the bytes of the file on disk, and the mapping lives until
// the consumer's deleter has run.
//
//	go run ./examples/arrow
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdio.h>
#include "dlpack/dlpack.h"

// A C consumer that keeps the tensor for later: it reports what it got
// and where the data is.
static DLManagedTensorVersioned* kept;

static void keep(DLManagedTensorVersioned* m) {
	DLTensor* t = &m->dl_tensor;
	printf("  C: got a %d-d float64 tensor of %lld elements, read-only: %s\n", t->ndim,
	       (long long)t->shape[0], (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? "yes" : "no");
	fflush(stdout);
	kept = m;
}

// Later, the consumer sums what it kept and releases it.
static double sum_and_release(void) {
	DLTensor* t = &kept->dl_tensor;
	const double* x = (const double*)((const char*)t->data + t->byte_offset);
	double s = 0;
	for (int64_t i = 0; i < t->shape[0]; i++) s += x[i * t->strides[0]];
	kept->deleter(kept);
	kept = NULL;
	return s;
}

static const void* kept_data(void) { return (const char*)kept->dl_tensor.data + kept->dl_tensor.byte_offset; }
*/
import "C"

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

const rows = 1_000_000

func main() {
	dir, err := os.MkdirTemp("", "dlarrow-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "prices.arrow")
	if err := writeFile(path); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("1. wrote %s: %d rows, columns id (int64) and price (float64), uncompressed\n", filepath.Base(path), rows)

	f, err := dlarrow.OpenFile(path)
	if err != nil {
		log.Fatal(err)
	}
	col, err := f.Column(0, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("2. mapped it; column %q is a %v tensor of shape %v\n", f.Schema().Field(1).Name, col.DataType(), col.Shape())

	m, err := dlpack.Produce(col, dlpack.Request{})
	if err != nil {
		log.Fatal(err)
	}
	C.keep((*C.DLManagedTensorVersioned)(m.Pointer()))
	col.Close()
	f.Close()
	fmt.Printf("3. Go released its column and closed the file; outstanding exports: %d\n", dlpack.Outstanding())
	fmt.Printf("  the C consumer reads the file's pages: data at %p lies in the mapping: %v\n",
		C.kept_data(), inMapping(uintptr(C.kept_data()), path))

	sum := float64(C.sum_and_release())
	fmt.Printf("4. C summed the prices: %.2f; deleter run, mapping gone: %v\n", sum, !inMapping(0, path))
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}

// writeFile writes the example's Arrow IPC file with arrow-go's writer.
func writeFile(path string) error {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float64Builder).Append(float64(i%100) / 4)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema))
	if err != nil {
		return err
	}
	if err := w.Write(rec); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}

// inMapping reports whether path is mapped into this process and, when
// addr is not 0, whether addr lies in its mapping (from /proc/self/maps).
func inMapping(addr uintptr, path string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	found := false
	for _, line := range strings.Split(string(maps), "\n") {
		var lo, hi uintptr
		var rest string
		if n, _ := fmt.Sscanf(line, "%x-%x %s", &lo, &hi, &rest); n < 2 || !strings.HasSuffix(line, path) {
			continue
		}
		if addr == 0 || (addr >= lo && addr < hi) {
			found = true
		}
	}
	return found
}
