// Command safetensors writes a safetensors file with Python's safetensors
// package, maps it in Go and hands one tensor to a C function without a
// copy: the C code reads the file's pages in place. It ends with nothing
// outstanding and the mapping released:
//
//	make files   # or: TENSORFILE_PYTHON=.venv/bin/python go run ./examples/safetensors
//
// The interpreter is TENSORFILE_PYTHON, else .venv/bin/python; it needs
// NumPy and safetensors (examples/python/requirements.txt).
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdint.h>
#include "dlpack/dlpack.h"

// sum_rows reads a read-only float32 matrix in place, writes each row's sum
// to out (rows entries at most), stores the data address it read, and
// releases the tensor: the consumer side of DLPack, in C.
static int sum_rows(DLManagedTensorVersioned* m, float* out, int rows, uintptr_t* addr) {
	DLTensor* t = &m->dl_tensor;
	int ok = m->version.major == 1 && t->device.device_type == kDLCPU && t->ndim == 2 &&
	         t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->shape[0] <= rows &&
	         (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
	if (ok) {
		const float* base = (const float*)((const char*)t->data + t->byte_offset);
		*addr = (uintptr_t)base;
		for (int64_t i = 0; i < t->shape[0]; i++) {
			float s = 0;
			for (int64_t j = 0; j < t->shape[1]; j++) s += base[i * t->strides[0] + j * t->strides[1]];
			out[i] = s;
		}
	}
	if (m->deleter) m->deleter(m);
	return ok ? (int)t->shape[0] : -1;
}
*/
import "C"

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

const writer = `
import sys, numpy as np, safetensors.numpy
safetensors.numpy.save_file({
    "embedding": np.arange(12, dtype=np.float32).reshape(3, 4),
    "bias": np.ones(4, dtype=np.float16),
}, sys.argv[1], metadata={"written_by": "safetensors " + safetensors.__version__})
`

func main() {
	py := os.Getenv("TENSORFILE_PYTHON")
	if py == "" {
		py = filepath.Join(".venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		log.Fatalf("no Python interpreter at %s (TENSORFILE_PYTHON): run `make .venv/.installed` first, or set TENSORFILE_PYTHON to a Python with NumPy and safetensors", py)
	}
	dir, err := os.MkdirTemp("", "tensorfile-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	if out, err := exec.Command(py, "-c", writer, path).CombinedOutput(); err != nil {
		log.Fatalf("python (%s) could not write the file: %v\n%s", py, err, out)
	}

	f, err := tensorfile.OpenSafetensors(path) // maps the file read-only
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("metadata:", f.Metadata())
	for _, t := range f.Tensors() {
		fmt.Println("tensor:", t)
	}
	base, size := f.MappedRange()
	emb, err := f.Tensor("embedding")
	if err != nil {
		log.Fatal(err)
	}

	// Hand the tensor to C: a DLManagedTensorVersioned whose data is the
	// mapped file. C releases it when done.
	m, err := dlpack.Produce(emb, dlpack.Request{})
	if err != nil {
		log.Fatal(err)
	}
	f.Close() // the mapping stays while C holds the tensor
	fmt.Println("after Close, live mappings:", tensorfile.LiveMappings())
	var sums [8]C.float
	var addr C.uintptr_t
	n := C.sum_rows((*C.DLManagedTensorVersioned)(m.Pointer()), &sums[0], 8, &addr)
	if n < 0 {
		log.Fatal("C refused the tensor")
	}
	fmt.Println("row sums computed by C:", sums[:n])
	fmt.Println("C read the file's pages in place (no copy):", addr != 0 && base != 0 && uintptr(addr) >= base && uintptr(addr) < base+uintptr(size))
	fmt.Println("after C released it, live mappings:", tensorfile.LiveMappings())
	if tensorfile.LiveMappings() != 0 {
		log.Fatal("the mapping was not released")
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
