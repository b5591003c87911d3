#include <stdlib.h>
#include <string.h>
#include "theirs.h"

static int64_t live = 0;

int64_t theirs_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }

typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape;
	int64_t stride;
	float data[];
} vec_block;

static void vec_free(DLManagedTensorVersioned* self) {
	__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	free(self);
}

static vec_block* vec_new(int64_t n, uint64_t flags, uint64_t pad) {
	if (n < 0 || n > (1 << 24)) {
		return NULL;
	}
	vec_block* b = malloc(sizeof(vec_block) + sizeof(float) * (size_t)(n + pad));
	if (b == NULL) {
		return NULL;
	}
	memset(&b->m, 0, sizeof b->m);
	b->shape = n;
	b->stride = 1;
	b->m.version.major = DLPACK_MAJOR_VERSION;
	b->m.version.minor = DLPACK_MINOR_VERSION;
	b->m.flags = flags;
	b->m.deleter = vec_free;
	b->m.dl_tensor.data = b->data;
	b->m.dl_tensor.byte_offset = pad * sizeof(float);
	b->m.dl_tensor.device.device_type = kDLCPU;
	b->m.dl_tensor.ndim = 1;
	b->m.dl_tensor.dtype.code = kDLFloat;
	b->m.dl_tensor.dtype.bits = 32;
	b->m.dl_tensor.dtype.lanes = 1;
	b->m.dl_tensor.shape = &b->shape;
	b->m.dl_tensor.strides = &b->stride;
	__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
	return b;
}

DLManagedTensorVersioned* theirs_fill(int64_t n, float x) {
	vec_block* b = vec_new(n, DLPACK_FLAG_BITMASK_READ_ONLY, 3);
	if (b == NULL) {
		return NULL;
	}
	for (int64_t i = 0; i < n; i++) {
		b->data[3 + i] = x;
	}
	return &b->m;
}

DLManagedTensorVersioned* theirs_negate(DLManagedTensorVersioned* in) {
	DLManagedTensorVersioned* out = NULL;
	DLTensor* t = &in->dl_tensor;
	if (in->version.major == 1 && t->device.device_type == kDLCPU && t->ndim == 1 && t->dtype.code == kDLFloat &&
	    t->dtype.bits == 32 && t->dtype.lanes == 1) {
		int64_t n = t->shape[0], stride = t->strides ? t->strides[0] : 1;
		vec_block* b = vec_new(n, DLPACK_FLAG_BITMASK_IS_COPIED, 0);
		if (b != NULL) {
			const float* src = (const float*)((const char*)t->data + t->byte_offset);
			for (int64_t i = 0; i < n; i++) {
				b->data[i] = -src[i * stride];
			}
			out = &b->m;
		}
	}
	if (in->deleter != NULL) {
		in->deleter(in);
	}
	return out;
}
