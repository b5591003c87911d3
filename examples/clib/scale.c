#include <stdlib.h>
#include <string.h>
#include "scale.h"

static int outstanding;

typedef struct {
	DLManagedTensorVersioned m;
	int64_t dims[2 * 8];
	double data[];
} result_block;

static void free_result(DLManagedTensorVersioned* self) {
	__atomic_sub_fetch(&outstanding, 1, __ATOMIC_SEQ_CST);
	free(self); // m is the first member of its block
}

int scale_outstanding(void) { return __atomic_load_n(&outstanding, __ATOMIC_SEQ_CST); }

DLManagedTensorVersioned* scale_tensor(DLManagedTensorVersioned* in, double factor) {
	DLTensor* t = &in->dl_tensor;
	DLManagedTensorVersioned* out = NULL;
	if (in->version.major != 1 || t->device.device_type != kDLCPU || t->dtype.code != kDLFloat ||
	    t->dtype.bits != 64 || t->dtype.lanes != 1 || t->ndim > 8) {
		goto done;
	}
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
	result_block* r = calloc(1, sizeof *r + sizeof(double) * (size_t)n);
	if (r == NULL) goto done;
	int64_t idx[8] = {0}, acc = 1;
	for (int i = t->ndim - 1; i >= 0; i--) {
		r->dims[i] = t->shape[i];
		r->dims[8 + i] = acc;
		acc *= t->shape[i];
	}
	const double* src = (const double*)((const char*)t->data + t->byte_offset);
	for (int64_t k = 0; k < n; k++) {
		int64_t off = 0;
		for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
		r->data[k] = factor * src[off];
		for (int i = t->ndim - 1; i >= 0 && ++idx[i] == t->shape[i]; i--) idx[i] = 0;
	}
	r->m.version.major = DLPACK_MAJOR_VERSION;
	r->m.version.minor = DLPACK_MINOR_VERSION;
	r->m.deleter = free_result;
	r->m.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
	r->m.dl_tensor.data = r->data;
	r->m.dl_tensor.device.device_type = kDLCPU;
	r->m.dl_tensor.ndim = t->ndim;
	r->m.dl_tensor.dtype = t->dtype;
	r->m.dl_tensor.shape = t->ndim ? r->dims : NULL;
	r->m.dl_tensor.strides = t->ndim ? r->dims + 8 : NULL;
	__atomic_add_fetch(&outstanding, 1, __ATOMIC_SEQ_CST);
	out = &r->m;
done:
	if (in->deleter) in->deleter(in); // we own the input: release it, always
	return out;
}
