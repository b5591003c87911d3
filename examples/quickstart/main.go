// Command quickstart exchanges tensors with C code, both ways, without
// copying: Go lends a slice to a C consumer that sums it and releases it,
// and a C producer hands Go a strided (transposed) matrix that Go views
// and closes.
//
//	go run ./examples/quickstart
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdio.h>
#include <stdlib.h>
#include "dlpack/dlpack.h"

// A C consumer: reads any float32 tensor (strides honoured), then releases
// it by calling its deleter, as DLPack requires.
static double consume_and_release(DLManagedTensorVersioned* m) {
	DLTensor* t = &m->dl_tensor;
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
	printf("  C: got a %d-d float32 tensor, version %u.%u, shape [", t->ndim,
	       m->version.major, m->version.minor);
	for (int i = 0; i < t->ndim; i++) printf(i ? " %lld" : "%lld", (long long)t->shape[i]);
	printf("], strides [");
	for (int i = 0; i < t->ndim; i++) printf(i ? " %lld" : "%lld", (long long)t->strides[i]);
	printf("]\n");
	fflush(stdout);
	double sum = 0;
	const float* base = (const float*)((const char*)t->data + t->byte_offset);
	int64_t idx[8] = {0};
	for (int64_t k = 0; k < n; k++) {
		int64_t off = 0;
		for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
		sum += base[off];
		for (int i = t->ndim - 1; i >= 0 && ++idx[i] == t->shape[i]; i--) idx[i] = 0;
	}
	m->deleter(m);
	return sum;
}

// A C producer: a 3x4 row-major matrix handed out transposed, as a 4x3
// tensor with strides {1, 4}. The deleter frees everything in one go.
typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape[2], strides[2];
	float data[12];
} owned_matrix;

static void free_matrix(DLManagedTensorVersioned* self) {
	printf("  C: deleter called, freeing the matrix\n");
	fflush(stdout);
	free(self->manager_ctx);
}

static DLManagedTensorVersioned* make_transposed(void) {
	owned_matrix* o = calloc(1, sizeof *o);
	for (int i = 0; i < 12; i++) o->data[i] = (float)i;
	o->shape[0] = 4; o->shape[1] = 3;
	o->strides[0] = 1; o->strides[1] = 4;
	o->m.version.major = DLPACK_MAJOR_VERSION;
	o->m.version.minor = DLPACK_MINOR_VERSION;
	o->m.manager_ctx = o;
	o->m.deleter = free_matrix;
	o->m.dl_tensor.data = o->data;
	o->m.dl_tensor.device.device_type = kDLCPU;
	o->m.dl_tensor.ndim = 2;
	o->m.dl_tensor.dtype.code = kDLFloat;
	o->m.dl_tensor.dtype.bits = 32;
	o->m.dl_tensor.dtype.lanes = 1;
	o->m.dl_tensor.shape = o->shape;
	o->m.dl_tensor.strides = o->strides;
	return &o->m;
}
*/
import "C"

import (
	"fmt"
	"log"
	"unsafe"

	"github.com/godlpack/dlpack"
)

func main() {
	fmt.Println("1. Go -> C: export a Go slice, zero-copy")
	xs := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{2, 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("  Go: exported %v as 2x3; outstanding exports: %d\n", xs, dlpack.Outstanding())
	sum := C.consume_and_release((*C.DLManagedTensorVersioned)(unsafe.Pointer(m)))
	fmt.Printf("  Go: C computed sum = %v; outstanding exports: %d\n", float64(sum), dlpack.Outstanding())

	fmt.Println("2. C -> Go: import a strided tensor made by C")
	f, err := dlpack.Import(unsafe.Pointer(C.make_transposed()))
	if err != nil {
		log.Fatal(err) // the tensor was already released
	}
	fmt.Printf("  Go: imported %v (contiguous: %v)\n", f, f.IsContiguous())
	v, err := dlpack.ViewOf[float32](f)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < int(f.Dim(0)); i++ {
		row := make([]float32, f.Dim(1))
		for j := range row {
			if row[j], err = v.At(i, j); err != nil {
				log.Fatal(err)
			}
		}
		fmt.Printf("  row %d: %v\n", i, row)
	}
	if _, err := dlpack.Slice[float32](f); err != nil {
		fmt.Printf("  Go: a flat slice is refused, as it should be: %v\n", err)
	}
	f.Close()
	if _, err := v.At(0, 0); err != nil {
		fmt.Printf("  Go: after Close the view reports: %v\n", err)
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
