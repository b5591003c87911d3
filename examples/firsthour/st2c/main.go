// Command st2c maps a safetensors file and hands its tensor "w" to C,
// which sums it and calls the deleter: usage st2c FILE.
package main

//go:generate go tool dlpack-header -o .

/*
#include "dlpack.h"

static double sum_and_release(DLManagedTensorVersioned* m) {
	const float* x = (const float*)((const char*)m->dl_tensor.data + m->dl_tensor.byte_offset);
	int64_t n = 1;
	for (int32_t i = 0; i < m->dl_tensor.ndim; i++) {
		n *= m->dl_tensor.shape[i];
	}
	double s = 0;
	for (int64_t i = 0; i < n; i++) {
		s += x[i];
	}
	if (m->deleter != NULL) {
		m->deleter(m);
	}
	return s;
}
*/
import "C"

import (
	"fmt"
	"log"
	"os"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

func main() {
	f, err := tensorfile.OpenSafetensors(os.Args[1]) // mapped read-only
	if err != nil {
		log.Fatal(err)
	}
	t, err := f.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	m, err := dlpack.Produce(t, dlpack.Request{}) // the zero Request: versioned, shared, READ_ONLY set
	if err != nil {
		log.Fatal(err)
	}
	addr, size := f.MappedRange()
	data := m.Versioned.DLTensor.Data
	fmt.Printf("shared with the mapping: %v, read-only: %v\n", data >= addr && data < addr+uintptr(size), m.Versioned.Flags&dlpack.FlagReadOnly != 0)
	sum := C.sum_and_release((*C.DLManagedTensorVersioned)(m.Pointer()))
	fmt.Printf("C sum: %g\n", float64(sum))
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("done: outstanding exports %d, live mappings %d\n", dlpack.Outstanding(), tensorfile.LiveMappings())
}
