//go:build dlpack_cflags

// Package viaflags is C code that includes <dlpack/dlpack.h> from the
// module directory of github.com/godlpack/dlpack, passed on the command
// line (a #cgo line cannot name another module's directory):
//
//	CGO_CFLAGS="-I$(go list -f '{{.Dir}}' github.com/godlpack/dlpack)/include" go test -tags dlpack_cflags ./viaflags
//
// go list answers with the module cache or, with -mod=vendor, the vendor
// directory. It is behind a build tag so that the module's other packages
// build without the variable.
package viaflags

/*
#include <string.h>
#include <dlpack/dlpack.h>

// Allocates a float32 vector of n elements through an exchange table and
// writes 1, 2, ..., n into it. NULL on failure.
static DLManagedTensorVersioned* viaflags_iota(DLPackExchangeAPI* api, int64_t n) {
	DLTensor proto;
	memset(&proto, 0, sizeof proto);
	proto.device.device_type = kDLCPU;
	proto.ndim = 1;
	proto.dtype.code = kDLFloat;
	proto.dtype.bits = 32;
	proto.dtype.lanes = 1;
	proto.shape = &n;
	DLManagedTensorVersioned* m = NULL;
	if (api->managed_tensor_allocator(&proto, &m, NULL, NULL) != 0) {
		return NULL;
	}
	float* xs = (float*)((char*)m->dl_tensor.data + m->dl_tensor.byte_offset);
	for (int64_t i = 0; i < n; i++) {
		xs[i] = (float)(i + 1);
	}
	return m;
}
*/
import "C"

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Iota returns a float32 tensor 1, 2, ..., n made in C through the
// library's own exchange table (dlpack.PublishedExchangeAPI); the caller
// owns it. nil on failure.
func Iota(n int64) unsafe.Pointer {
	api := (*C.DLPackExchangeAPI)(unsafe.Pointer(dlpack.PublishedExchangeAPI()))
	return unsafe.Pointer(C.viaflags_iota(api, C.int64_t(n)))
}
