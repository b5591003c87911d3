#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cprod.h"

static int64_t live = 0;

int64_t cprod_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }

typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape[2];
	int64_t strides[2];
	double data[];
} arange_block;

static void arange_free(DLManagedTensorVersioned* self) {
	__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	free(self);  // m is the first member of its block
}

DLManagedTensorVersioned* cprod_arange(int64_t rows, int64_t cols) {
	if (rows < 0 || cols < 0 || (rows > 0 && cols > (int64_t)(1 << 24) / rows)) {
		return NULL;
	}
	arange_block* b = malloc(sizeof(arange_block) + sizeof(double) * (size_t)(rows * cols));
	if (b == NULL) {
		return NULL;
	}
	memset(&b->m, 0, sizeof b->m);
	b->shape[0] = rows;
	b->shape[1] = cols;
	b->strides[0] = 1;
	b->strides[1] = rows;
	for (int64_t i = 0; i < rows; i++) {
		for (int64_t j = 0; j < cols; j++) {
			b->data[i + j * rows] = (double)(i * cols + j);
		}
	}
	b->m.version.major = DLPACK_MAJOR_VERSION;
	b->m.version.minor = DLPACK_MINOR_VERSION;
	b->m.deleter = arange_free;
	b->m.dl_tensor.data = b->data;
	b->m.dl_tensor.device.device_type = kDLCPU;
	b->m.dl_tensor.ndim = 2;
	b->m.dl_tensor.dtype.code = kDLFloat;
	b->m.dl_tensor.dtype.bits = 64;
	b->m.dl_tensor.dtype.lanes = 1;
	b->m.dl_tensor.shape = b->shape;
	b->m.dl_tensor.strides = b->strides;
	__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
	return &b->m;
}

double cprod_sum(DLManagedTensorVersioned* m) {
	if (m == NULL) {
		return NAN;
	}
	DLTensor* t = &m->dl_tensor;
	double sum = NAN;
	int bits = t->dtype.bits;
	if (m->version.major == 1 && t->device.device_type == kDLCPU && t->dtype.code == kDLFloat &&
	    (bits == 32 || bits == 64) && t->dtype.lanes == 1 && t->ndim >= 0 && t->ndim <= 8) {
		int64_t numel = 1, idx[8] = {0};
		for (int d = 0; d < t->ndim; d++) {
			numel *= t->shape[d];
		}
		const char* base = (const char*)t->data + t->byte_offset;
		sum = 0;
		for (int64_t k = 0; k < numel; k++) {
			int64_t off = 0, stride = 1;
			for (int d = t->ndim - 1; d >= 0; d--) {
				off += idx[d] * (t->strides ? t->strides[d] : stride);
				stride *= t->shape[d];
			}
			sum += bits == 64 ? ((const double*)base)[off] : ((const float*)base)[off];
			for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--) {
				idx[d] = 0;
			}
		}
	}
	if (m->deleter != NULL) {
		m->deleter(m);
	}
	return sum;
}
