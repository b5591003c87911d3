/*
 * dlpack.h: the DLPack v1.3 in-memory tensor ABI, as used by the Go
 * package github.com/godlpack/dlpack.
 *
 * Written for this project from the DLPack v1.3 specification; the
 * structure layouts, enumeration values and flag bits are the ABI and
 * match every other conforming header. Licensed under Apache-2.0.
 *
 * Ownership in one paragraph: a producer lends a DLManagedTensorVersioned
 * (or a legacy DLManagedTensor) to a consumer. The consumer calls
 * deleter(self) exactly once when it is done, from any thread; the deleter
 * frees the struct itself, its shape and strides, and whatever manager_ctx
 * refers to. A NULL deleter means there is nothing to release.
 */
#ifndef GODLPACK_DLPACK_H_
#define GODLPACK_DLPACK_H_

/* The upstream dlpack.h, and the copies PyTorch, TVM and others ship, are
 * guarded by DLPACK_DLPACK_H_. Whichever of them a C file includes first
 * declares the ABI and the other adds nothing, so the two can share a file.
 * Our extras (the 1.3 type codes, devices and exchange API) are then only
 * there if the other header has them too. */
#ifdef DLPACK_DLPACK_H_
#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1
#error "a dlpack.h included before this one is not DLPack 1.x"
#endif
#else
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

#if defined(_WIN32)
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the ABI a managed tensor was written for. A consumer that sees
 * a major version it does not know must call the deleter and read nothing
 * else: only the fields up to and including flags keep their place. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Where the data lives. Values are fixed by the ABI; new minors add more. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
  /* Added on the specification's main branch after the 1.3 tag: Google TPU
   * device memory, the pinned host memory a TPU runtime transfers from
   * (as kDLCUDAHost is to kDLCUDA), and Huawei Ascend NPU device memory. */
  kDLTPU = 19,
  kDLTPUHost = 20,
  kDLAscend = 21,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Type code of DLDataType. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
  /* Added on the specification's main branch after the 1.3 tag: a complex
   * number made of two bfloat16 (real, then imaginary), 32 bits, laid out
   * as kDLComplex is. */
  kDLBcomplex = 18U,
} DLDataTypeCode;

/* Element type: code, bits per lane, and lanes (1 for scalars). */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A plain tensor descriptor. The first element is at
 * (char*)data + byte_offset. strides count elements, not bytes; a NULL
 * strides with ndim > 0 means compact row-major and is only allowed for
 * legacy tensors and versions below 1.2. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* Legacy (pre-1.0) managed tensor: no version and no flags. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* Flag bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* Versioned managed tensor (DLPack 1.0 and later). */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* ---- C exchange API (v1.3) ------------------------------------------- */

/* Allocates a new managed tensor like prototype (dtype, shape, device) and
 * stores it in *out. Returns 0 on success, -1 on failure (then error_ctx's
 * SetError, when given, has been called). */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
    void (*SetError)(void* error_ctx, const char* kind, const char* message));

/* Converts a framework object (a PyObject*) to a managed tensor without
 * stream synchronisation. Returns 0 on success, -1 with a Python error set. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(
    void* py_object, DLManagedTensorVersioned** out);

/* Converts a managed tensor to a framework object (a PyObject*). */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(
    DLManagedTensorVersioned* tensor, void** out_py_object);

/* Fills a non-owning DLTensor view of a framework object. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);

/* Reports the stream the framework currently works on for a device (NULL
 * for devices without streams, such as the CPU). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type,
                                       int32_t device_id, void** out_stream);

typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

/* A process-lifetime table of entry points. Consumers check
 * header.version and may walk prev_api for older tables. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_DLPACK_H_ */
#endif /* GODLPACK_DLPACK_H_ */
