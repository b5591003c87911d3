//go:build cgo

package dlpack

// This file is the package's only cgo preamble. It holds declarations only,
// because it also carries the //export of the release callback (cgo copies
// such a preamble into two C files); the definitions are in cgo_bridge.c.
//
// Who calls what, from which thread:
//   - godlpack_release_versioned / _legacy are the deleters of Go-memory
//     exports. A consumer calls one exactly once, from any thread (including
//     threads Go never created). It trusts only the hidden prefix this
//     package wrote in front of the managed struct and calls godlpackGoRelease
//     once with the handle found there. The block is normally the export
//     record's own and stays with it for its next export; only one-off
//     blocks (ndim above keptNDim) are freed by the deleter.
//   - godlpack_buffer_release_* are the deleters of Buffer exports: pure C,
//     no call into Go, safe even during process exit.
//   - godlpack_call_deleter is how Go calls a producer's deleter (Go cannot
//     call a C function pointer itself); godlpack_call_deleters calls many
//     in one crossing (BorrowBatch).

/*
#cgo CFLAGS: -I${SRCDIR}/include -O2
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "dlpack/dlpack.h"

// Hidden prefix in front of every managed struct this package allocates.
typedef struct {
	uint64_t handle;  // handle of the export record (registry.go), or the buffer control block
	uint64_t gen;     // generation of the record's export (Go exports)
	uint64_t magic;   // GODLPACK_MAGIC_* while live, GODLPACK_MAGIC_DEAD once released
} godlpack_prefix;

// Control block at the start of a Buffer allocation; data follows at
// GODLPACK_BUFFER_DATA bytes.
typedef struct {
	int64_t refs;     // the Go Buffer's reference plus one per live export
	uint64_t nbytes;  // bytes of data
} godlpack_bufctl;

enum {
	GODLPACK_ALIGN = 256,
	GODLPACK_BUFFER_DATA = 256,
	godlpack_sizeof_prefix = sizeof(godlpack_prefix),
	godlpack_sizeof_bufctl = sizeof(godlpack_bufctl),
	godlpack_off_tensor_data = offsetof(DLTensor, data),
	godlpack_off_tensor_device = offsetof(DLTensor, device),
	godlpack_off_tensor_ndim = offsetof(DLTensor, ndim),
	godlpack_off_tensor_dtype = offsetof(DLTensor, dtype),
	godlpack_off_tensor_shape = offsetof(DLTensor, shape),
	godlpack_off_tensor_strides = offsetof(DLTensor, strides),
	godlpack_off_tensor_byte_offset = offsetof(DLTensor, byte_offset),
	godlpack_off_device_id = offsetof(DLDevice, device_id),
	godlpack_off_dtype_bits = offsetof(DLDataType, bits),
	godlpack_off_dtype_lanes = offsetof(DLDataType, lanes),
	godlpack_off_version_minor = offsetof(DLPackVersion, minor),
	godlpack_off_legacy_ctx = offsetof(DLManagedTensor, manager_ctx),
	godlpack_off_legacy_deleter = offsetof(DLManagedTensor, deleter),
	godlpack_off_versioned_ctx = offsetof(DLManagedTensorVersioned, manager_ctx),
	godlpack_off_versioned_deleter = offsetof(DLManagedTensorVersioned, deleter),
	godlpack_off_versioned_flags = offsetof(DLManagedTensorVersioned, flags),
	godlpack_off_versioned_tensor = offsetof(DLManagedTensorVersioned, dl_tensor),
	godlpack_off_api_header_prev = offsetof(DLPackExchangeAPIHeader, prev_api),
	godlpack_off_api_allocator = offsetof(DLPackExchangeAPI, managed_tensor_allocator),
	godlpack_off_api_from_py = offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync),
	godlpack_off_api_to_py = offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync),
	godlpack_off_api_dltensor_from_py = offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync),
	godlpack_off_api_stream = offsetof(DLPackExchangeAPI, current_work_stream),
};

#define GODLPACK_MAGIC_GO   0x6f672d646c70616bULL
#define GODLPACK_MAGIC_BUF  0x6275662d646c706bULL
#define GODLPACK_MAGIC_DEAD 0x646561642d646c70ULL // not 0xdeaddead...: Go treats that pattern in a pointer slot as fatal

extern int64_t godlpack_buffer_exports;
extern int64_t godlpack_bad_releases;
extern int64_t godlpack_live_blocks;
extern int64_t godlpack_kept_blocks;
extern unsigned char godlpack_empty[GODLPACK_ALIGN];

void godlpack_release_versioned(DLManagedTensorVersioned* self);
void godlpack_release_legacy(DLManagedTensor* self);
void godlpack_buffer_release_versioned(DLManagedTensorVersioned* self);
void godlpack_buffer_release_legacy(DLManagedTensor* self);
void godlpack_call_deleter(uintptr_t fn, uintptr_t self);
void godlpack_call_deleters(const uintptr_t* fns, const uintptr_t* selfs, size_t n);
void* godlpack_buffer_alloc(uint64_t nbytes);
void* godlpack_block_alloc(size_t n);
void* godlpack_kept_alloc(size_t n);
void godlpack_kept_free(void* p);
void godlpack_buffer_free(void* ctl);
extern DLPackExchangeAPI godlpack_exchange_api;
int godlpack_call_allocator(uintptr_t fn, uint8_t code, uint8_t bits, uint16_t lanes, int32_t dev_type,
                            int32_t dev_id, int32_t ndim, int64_t* shape, uintptr_t* out, char* err, size_t errcap);
int godlpack_call_stream(uintptr_t fn, int32_t dev_type, int32_t dev_id, uintptr_t* out);
*/
import "C"

import (
	"unsafe"

	// The header above lives in include/dlpack; importing its package is
	// what makes `go mod vendor` keep it (a folder without a Go package
	// is not vendored).
	_ "github.com/godlpack/dlpack/include/dlpack"
)

// Compile-time layout checks: the index below is the OR of (Go ^ C) for
// every size and field offset, so the build fails with "index out of range"
// as soon as any of them differs from what the C compiler says.
var _ = [1]struct{}{}[uint64(unsafe.Sizeof(Version{}))^uint64(C.sizeof_DLPackVersion)|
	uint64(unsafe.Sizeof(Device{}))^uint64(C.sizeof_DLDevice)|
	uint64(unsafe.Sizeof(DataType{}))^uint64(C.sizeof_DLDataType)|
	uint64(unsafe.Sizeof(Tensor{}))^uint64(C.sizeof_DLTensor)|
	uint64(unsafe.Sizeof(ManagedTensor{}))^uint64(C.sizeof_DLManagedTensor)|
	uint64(unsafe.Sizeof(ManagedTensorVersioned{}))^uint64(C.sizeof_DLManagedTensorVersioned)|
	uint64(unsafe.Sizeof(ExchangeAPIHeader{}))^uint64(C.sizeof_DLPackExchangeAPIHeader)|
	uint64(unsafe.Sizeof(ExchangeAPI{}))^uint64(C.sizeof_DLPackExchangeAPI)|
	uint64(unsafe.Sizeof(prefix{}))^uint64(C.godlpack_sizeof_prefix)|
	uint64(unsafe.Sizeof(bufctl{}))^uint64(C.godlpack_sizeof_bufctl)|
	uint64(bufferDataOffset)^uint64(C.GODLPACK_BUFFER_DATA)|
	uint64(unsafe.Offsetof(Tensor{}.Data))^uint64(C.godlpack_off_tensor_data)|
	uint64(unsafe.Offsetof(Tensor{}.Device))^uint64(C.godlpack_off_tensor_device)|
	uint64(unsafe.Offsetof(Tensor{}.NDim))^uint64(C.godlpack_off_tensor_ndim)|
	uint64(unsafe.Offsetof(Tensor{}.DType))^uint64(C.godlpack_off_tensor_dtype)|
	uint64(unsafe.Offsetof(Tensor{}.Shape))^uint64(C.godlpack_off_tensor_shape)|
	uint64(unsafe.Offsetof(Tensor{}.Strides))^uint64(C.godlpack_off_tensor_strides)|
	uint64(unsafe.Offsetof(Tensor{}.ByteOffset))^uint64(C.godlpack_off_tensor_byte_offset)|
	uint64(unsafe.Offsetof(Device{}.ID))^uint64(C.godlpack_off_device_id)|
	uint64(unsafe.Offsetof(DataType{}.Bits))^uint64(C.godlpack_off_dtype_bits)|
	uint64(unsafe.Offsetof(DataType{}.Lanes))^uint64(C.godlpack_off_dtype_lanes)|
	uint64(unsafe.Offsetof(Version{}.Minor))^uint64(C.godlpack_off_version_minor)|
	uint64(unsafe.Offsetof(ManagedTensor{}.ManagerCtx))^uint64(C.godlpack_off_legacy_ctx)|
	uint64(unsafe.Offsetof(ManagedTensor{}.Deleter))^uint64(C.godlpack_off_legacy_deleter)|
	uint64(unsafe.Offsetof(ManagedTensorVersioned{}.ManagerCtx))^uint64(C.godlpack_off_versioned_ctx)|
	uint64(unsafe.Offsetof(ManagedTensorVersioned{}.Deleter))^uint64(C.godlpack_off_versioned_deleter)|
	uint64(unsafe.Offsetof(ManagedTensorVersioned{}.Flags))^uint64(C.godlpack_off_versioned_flags)|
	uint64(unsafe.Offsetof(ManagedTensorVersioned{}.DLTensor))^uint64(C.godlpack_off_versioned_tensor)|
	uint64(unsafe.Offsetof(ExchangeAPIHeader{}.PrevAPI))^uint64(C.godlpack_off_api_header_prev)|
	uint64(unsafe.Offsetof(ExchangeAPI{}.ManagedTensorAllocator))^uint64(C.godlpack_off_api_allocator)|
	uint64(unsafe.Offsetof(ExchangeAPI{}.ManagedTensorFromPyObjectNoSync))^uint64(C.godlpack_off_api_from_py)|
	uint64(unsafe.Offsetof(ExchangeAPI{}.ManagedTensorToPyObjectNoSync))^uint64(C.godlpack_off_api_to_py)|
	uint64(unsafe.Offsetof(ExchangeAPI{}.DLTensorFromPyObjectNoSync))^uint64(C.godlpack_off_api_dltensor_from_py)|
	uint64(unsafe.Offsetof(ExchangeAPI{}.CurrentWorkStream))^uint64(C.godlpack_off_api_stream)]

const (
	cgoEnabled  = true
	magicGo     = C.GODLPACK_MAGIC_GO
	magicBuffer = C.GODLPACK_MAGIC_BUF
	magicDead   = C.GODLPACK_MAGIC_DEAD
	bufferAlign = C.GODLPACK_ALIGN
)

// C function pointers, as the uintptr values stored in Deleter fields.
var (
	deleterGoVersioned     = uintptr(unsafe.Pointer(C.godlpack_release_versioned))
	deleterGoLegacy        = uintptr(unsafe.Pointer(C.godlpack_release_legacy))
	deleterBufferVersioned = uintptr(unsafe.Pointer(C.godlpack_buffer_release_versioned))
	deleterBufferLegacy    = uintptr(unsafe.Pointer(C.godlpack_buffer_release_legacy))
	emptyData              = uintptr(unsafe.Pointer(&C.godlpack_empty[0]))
	bufferExports          = (*int64)(unsafe.Pointer(&C.godlpack_buffer_exports))
	badReleases            = (*int64)(unsafe.Pointer(&C.godlpack_bad_releases))
	liveBlocks             = (*int64)(unsafe.Pointer(&C.godlpack_live_blocks))
	keptBlocks             = (*int64)(unsafe.Pointer(&C.godlpack_kept_blocks))
)

// callDeleter calls the C function pointer fn with self.
func callDeleter(fn, self uintptr) {
	C.godlpack_call_deleter(C.uintptr_t(fn), C.uintptr_t(self))
}

// callDeleters calls fns[i](selfs[i]) for every i in one crossing.
func callDeleters(fns, selfs []uintptr) {
	if len(fns) == 0 {
		return
	}
	C.godlpack_call_deleters((*C.uintptr_t)(unsafe.Pointer(&fns[0])), (*C.uintptr_t)(unsafe.Pointer(&selfs[0])), C.size_t(len(fns)))
}

// cMalloc returns n bytes of C memory (8-byte aligned) for a managed
// struct block, counted in Stats.CBlocks until a deleter frees it; or nil.
func cMalloc(n uintptr) unsafe.Pointer { return C.godlpack_block_alloc(C.size_t(n)) }

// cFree frees a block from cMalloc or a Buffer from cBufferAlloc (both
// counted in Stats.CBlocks).
func cFree(p unsafe.Pointer) { C.godlpack_buffer_free(p) }

// cKeptAlloc returns n bytes of C memory for an export record's own block,
// counted in Stats.KeptBlocks; or nil. cKeptFree frees it.
func cKeptAlloc(n uintptr) unsafe.Pointer { return C.godlpack_kept_alloc(C.size_t(n)) }
func cKeptFree(p unsafe.Pointer)          { C.godlpack_kept_free(p) }

// cBufferAlloc returns a Buffer control block followed, at bufferDataOffset,
// by nbytes of data, 256-byte aligned and zeroed; or nil.
func cBufferAlloc(nbytes uint64) unsafe.Pointer {
	return C.godlpack_buffer_alloc(C.uint64_t(nbytes))
}

// publishedAPI is this package's exchange table (process lifetime, C memory).
var publishedAPI = (*ExchangeAPI)(unsafe.Pointer(&C.godlpack_exchange_api))

// callAllocator calls a DLPackManagedTensorAllocator with a prototype; on
// failure msg holds what the allocator reported through SetError.
func callAllocator(fn uintptr, dt DataType, dev Device, shape []int64) (m uintptr, rc int, msg string) {
	var out C.uintptr_t
	var errbuf [256]C.char
	var sp *C.int64_t
	if len(shape) > 0 {
		sp = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	r := C.godlpack_call_allocator(C.uintptr_t(fn), C.uint8_t(dt.Code), C.uint8_t(dt.Bits), C.uint16_t(dt.Lanes),
		C.int32_t(dev.Type), C.int32_t(dev.ID), C.int32_t(len(shape)), sp, &out, &errbuf[0], C.size_t(len(errbuf)))
	if r != 0 {
		msg = C.GoString(&errbuf[0])
	}
	return uintptr(out), int(r), msg
}

// callStream calls a DLPackCurrentWorkStream.
func callStream(fn uintptr, dev Device) (uintptr, int) {
	var out C.uintptr_t
	r := C.godlpack_call_stream(C.uintptr_t(fn), C.int32_t(dev.Type), C.int32_t(dev.ID), &out)
	return uintptr(out), int(r)
}

//export godlpackGoRelease
func godlpackGoRelease(h, gen C.uint64_t, block unsafe.Pointer) C.int {
	// A panic here would unwind into C and kill the process: releaseExport
	// recovers from everything and counts what it could not release.
	if releaseExport(uintptr(h), uint64(gen), block) {
		return 1 // a one-off block: the deleter frees it
	}
	return 0
}
