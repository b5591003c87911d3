// Command gonum multiplies a matrix that a C library produced with gonum,
// in the C library's memory, and hands the product back to C:
//
//	go run ./examples/gonum
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdio.h>
#include <stdlib.h>
#include "dlpack/dlpack.h"

// A C producer: a 2x3 float64 matrix 1..6 (rows padded to 4: stride 4).
typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape[2], strides[2];
	double data[8];
} cmat;

static void free_cmat(DLManagedTensorVersioned* self) {
	printf("  C: matrix released\n");
	fflush(stdout);
	free(self);
}

static DLManagedTensorVersioned* make_matrix(void) {
	cmat* c = calloc(1, sizeof *c);
	double v[8] = {1, 2, 3, 0, 4, 5, 6, 0};
	for (int i = 0; i < 8; i++) c->data[i] = v[i];
	c->shape[0] = 2; c->shape[1] = 3;
	c->strides[0] = 4; c->strides[1] = 1;
	c->m.version.major = 1; c->m.version.minor = 3;
	c->m.deleter = free_cmat;
	c->m.dl_tensor.data = c->data;
	c->m.dl_tensor.device.device_type = kDLCPU;
	c->m.dl_tensor.ndim = 2;
	c->m.dl_tensor.dtype.code = kDLFloat; c->m.dl_tensor.dtype.bits = 64; c->m.dl_tensor.dtype.lanes = 1;
	c->m.dl_tensor.shape = c->shape;
	c->m.dl_tensor.strides = c->strides;
	return &c->m;
}

// A C consumer: prints a 2-d float64 tensor and releases it.
static void print_and_release(DLManagedTensorVersioned* m) {
	DLTensor* t = &m->dl_tensor;
	const double* d = (const double*)t->data;
	for (int64_t i = 0; i < t->shape[0]; i++) {
		printf("  C:");
		for (int64_t j = 0; j < t->shape[1]; j++) printf(" %6.1f", d[i * t->strides[0] + j * t->strides[1]]);
		printf("\n");
	}
	fflush(stdout);
	m->deleter(m);
}
*/
import "C"

import (
	"fmt"
	"log"
	"runtime"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgonum"
	"gonum.org/v1/gonum/mat"
)

func main() {
	f, err := dlpack.Import(unsafe.Pointer(C.make_matrix()))
	if err != nil {
		log.Fatal(err)
	}
	a, err := dlgonum.ToDense(f) // shares C's memory; a now owns the tensor
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Go: A from C, row stride %d, no copy:\n    %v\n", a.RawMatrix().Stride, mat.Formatted(a, mat.Prefix("    ")))

	a.Scale(2, a) // in place, in C's memory
	b := mat.NewDense(3, 2, []float64{1, 0, 0, 1, 1, 1})
	var c mat.Dense
	c.Mul(a, b)
	fmt.Println("Go: C = 2A x B computed by gonum; handing it to C")
	m, err := dlpack.Produce(dlgonum.FromDense(&c), dlpack.Request{})
	if err != nil {
		log.Fatal(err)
	}
	C.print_and_release((*C.DLManagedTensorVersioned)(m.Pointer()))

	// From here on nothing uses a: once collected, its tensor is released.
	runtime.KeepAlive(a)
	for i := 0; i < 20 && f.Err() == nil; i++ {
		runtime.GC()
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
