// C fixtures for the tests of package dlpack: producers of well-formed and
// malformed tensors with counting deleters, consumers of exports, and
// helpers that release tensors from threads Go never created.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cshim.h"

int64_t cshim_deletes[CSHIM_SLOTS];
int64_t cshim_live = 0; // producer blocks not yet freed

typedef struct {
	int slot;
	int owns_data;
	void* data_alloc;
} cshim_ctx;

// One allocation: ctx, managed struct (either kind), shape, strides.
typedef struct {
	cshim_ctx ctx;
	union {
		DLManagedTensorVersioned v;
		DLManagedTensor l;
	} m;
	int64_t dims[2 * CSHIM_MAXDIMS];
} cshim_block;

static void free_block(cshim_block* b) {
	__atomic_add_fetch(&cshim_deletes[b->ctx.slot], 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&cshim_live, 1, __ATOMIC_SEQ_CST);
	if (b->ctx.owns_data) {
		free(b->ctx.data_alloc);
	}
	free(b);
}

static void deleter_versioned(DLManagedTensorVersioned* self) {
	free_block((cshim_block*)self->manager_ctx);
}

static void deleter_legacy(DLManagedTensor* self) {
	free_block((cshim_block*)self->manager_ctx);
}

void* cshim_make(const cshim_spec* s) {
	cshim_block* b = calloc(1, sizeof(cshim_block));
	__atomic_add_fetch(&cshim_live, 1, __ATOMIC_SEQ_CST);
	b->ctx.slot = s->slot;
	void* data = (void*)s->data_addr;
	if (s->data_len > 0 || s->alloc_data) {
		size_t n = s->data_len + 256;
		b->ctx.data_alloc = aligned_alloc(64, (n + 63) / 64 * 64);
		memset(b->ctx.data_alloc, 0, n);
		memcpy((char*)b->ctx.data_alloc + s->data_shift, s->data, s->data_len);
		b->ctx.owns_data = 1;
		data = (char*)b->ctx.data_alloc + s->data_shift;
	}
	DLTensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.device.device_type = (DLDeviceType)s->device_type;
	t.device.device_id = s->device_id;
	t.ndim = s->ndim;
	t.dtype.code = s->code;
	t.dtype.bits = s->bits;
	t.dtype.lanes = s->lanes;
	t.byte_offset = s->byte_offset;
	int n = s->nshape < CSHIM_MAXDIMS ? s->nshape : CSHIM_MAXDIMS;
	for (int i = 0; i < n; i++) {
		b->dims[i] = s->shape[i];
		b->dims[CSHIM_MAXDIMS + i] = s->strides_given ? s->strides[i] : 0;
	}
	t.shape = s->shape_null ? NULL : &b->dims[0];
	t.strides = s->strides_given ? &b->dims[CSHIM_MAXDIMS] : NULL;
	if (s->legacy) {
		b->m.l.dl_tensor = t;
		b->m.l.manager_ctx = b;
		b->m.l.deleter = s->null_deleter ? NULL : deleter_legacy;
		return &b->m.l;
	}
	b->m.v.version.major = s->major;
	b->m.v.version.minor = s->minor;
	b->m.v.manager_ctx = b;
	b->m.v.deleter = s->null_deleter ? NULL : deleter_versioned;
	b->m.v.flags = s->flags;
	b->m.v.dl_tensor = t;
	return &b->m.v;
}

void cshim_free_unmanaged(void* p) {
	// For tensors made with null_deleter: free the block without counting.
	cshim_block* b = (cshim_block*)((char*)p - offsetof(cshim_block, m));
	__atomic_sub_fetch(&cshim_live, 1, __ATOMIC_SEQ_CST);
	if (b->ctx.owns_data) {
		free(b->ctx.data_alloc);
	}
	free(b);
}

// Reads a float32 or float64 tensor with any strides and returns the sum.
double cshim_sum(const DLTensor* t) {
	int64_t idx[CSHIM_MAXDIMS] = {0};
	int64_t numel = 1;
	for (int i = 0; i < t->ndim; i++) {
		numel *= t->shape[i];
	}
	double sum = 0;
	const char* base = (const char*)t->data + t->byte_offset;
	int size = t->dtype.bits / 8;
	for (int64_t k = 0; k < numel; k++) {
		int64_t off = 0, stride = 1;
		for (int i = t->ndim - 1; i >= 0; i--) {
			int64_t st = t->strides ? t->strides[i] : stride;
			off += idx[i] * st;
			stride *= t->shape[i];
		}
		const char* p = base + off * size;
		sum += size == 4 ? (double)*(const float*)p : *(const double*)p;
		for (int i = t->ndim - 1; i >= 0; i--) {
			if (++idx[i] < t->shape[i]) {
				break;
			}
			idx[i] = 0;
		}
	}
	return sum;
}

void cshim_call_versioned(DLManagedTensorVersioned* m) {
	if (m->deleter) {
		m->deleter(m);
	}
}

void cshim_call_legacy(DLManagedTensor* m) {
	if (m->deleter) {
		m->deleter(m);
	}
}

typedef struct {
	void** ptrs;
	int n;
	int legacy;
} release_job;

static void* release_thread(void* arg) {
	release_job* j = (release_job*)arg;
	for (int i = 0; i < j->n; i++) {
		if (j->legacy) {
			cshim_call_legacy((DLManagedTensor*)j->ptrs[i]);
		} else {
			cshim_call_versioned((DLManagedTensorVersioned*)j->ptrs[i]);
		}
	}
	return NULL;
}

// Releases n tensors from nthreads new pthreads, each thread exiting right
// after its share; returns 0 on success.
int cshim_release_on_threads(void** ptrs, int n, int nthreads, int legacy) {
	pthread_t th[64];
	release_job jobs[64];
	if (nthreads > 64) {
		nthreads = 64;
	}
	int per = (n + nthreads - 1) / nthreads;
	int started = 0;
	for (int i = 0; i < nthreads; i++) {
		int lo = i * per, hi = lo + per > n ? n : lo + per;
		if (lo >= hi) {
			break;
		}
		jobs[i].ptrs = ptrs + lo;
		jobs[i].n = hi - lo;
		jobs[i].legacy = legacy;
		if (pthread_create(&th[i], NULL, release_thread, &jobs[i]) != 0) {
			return -1;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
	}
	return 0;
}

size_t cshim_layout(cshim_field* out, size_t cap) {
#define F(T, f) {#T "." #f, offsetof(T, f), sizeof(((T*)0)->f)}
#define S(T) {#T, 0, sizeof(T)}
	cshim_field all[] = {
		S(DLPackVersion), F(DLPackVersion, major), F(DLPackVersion, minor),
		S(DLDevice), F(DLDevice, device_type), F(DLDevice, device_id),
		S(DLDataType), F(DLDataType, code), F(DLDataType, bits), F(DLDataType, lanes),
		S(DLTensor), F(DLTensor, data), F(DLTensor, device), F(DLTensor, ndim), F(DLTensor, dtype),
		F(DLTensor, shape), F(DLTensor, strides), F(DLTensor, byte_offset),
		S(DLManagedTensor), F(DLManagedTensor, dl_tensor), F(DLManagedTensor, manager_ctx),
		F(DLManagedTensor, deleter),
		S(DLManagedTensorVersioned), F(DLManagedTensorVersioned, version),
		F(DLManagedTensorVersioned, manager_ctx), F(DLManagedTensorVersioned, deleter),
		F(DLManagedTensorVersioned, flags), F(DLManagedTensorVersioned, dl_tensor),
		S(DLPackExchangeAPIHeader), F(DLPackExchangeAPIHeader, version), F(DLPackExchangeAPIHeader, prev_api),
		S(DLPackExchangeAPI), F(DLPackExchangeAPI, header), F(DLPackExchangeAPI, managed_tensor_allocator),
		F(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync),
		F(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync),
		F(DLPackExchangeAPI, dltensor_from_py_object_no_sync), F(DLPackExchangeAPI, current_work_stream),
	};
#undef F
#undef S
	size_t n = sizeof all / sizeof all[0];
	for (size_t i = 0; i < n && i < cap; i++) {
		out[i] = all[i];
	}
	return n;
}

// A Go-export-shaped block with a dead prefix, for testing that the
// package's deleter refuses structs it did not make.
void* cshim_fake_block(size_t prefix_and_struct) {
	return calloc(1, prefix_and_struct);
}

// Leaves a freed chunk of n bytes full of 0xdeaddeaddeaddead (Go's poison
// for dead pointer slots) at the head of this thread's malloc cache, so
// that the next malloc of that size returns it.
void cshim_poison_free(size_t n) {
	uint64_t* p = malloc(n);
	for (size_t i = 0; i < n / 8; i++) {
		p[i] = 0xdeaddeaddeaddeadULL;
	}
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
}

// ---- Benchmark fixtures: the cheapest honest producer and consumer ----

static float bench_data[1024];

typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape[2], strides[2];
} bench_block;

static void bench_free(DLManagedTensorVersioned* self) { free(self); }

DLManagedTensorVersioned* cshim_bench_make(void) {
	bench_block* b = malloc(sizeof *b);
	b->shape[0] = 32; b->shape[1] = 32;
	b->strides[0] = 32; b->strides[1] = 1;
	b->m.version.major = 1; b->m.version.minor = 3;
	b->m.manager_ctx = NULL;
	b->m.deleter = bench_free;
	b->m.flags = 0;
	b->m.dl_tensor.data = bench_data;
	b->m.dl_tensor.device.device_type = kDLCPU;
	b->m.dl_tensor.device.device_id = 0;
	b->m.dl_tensor.ndim = 2;
	b->m.dl_tensor.dtype.code = kDLFloat;
	b->m.dl_tensor.dtype.bits = 32;
	b->m.dl_tensor.dtype.lanes = 1;
	b->m.dl_tensor.shape = b->shape;
	b->m.dl_tensor.strides = b->strides;
	b->m.dl_tensor.byte_offset = 0;
	return &b->m;
}

// A producer that hands over n tensors in one call.
void cshim_bench_make_batch(void** out, int n) {
	for (int i = 0; i < n; i++) {
		out[i] = cshim_bench_make();
	}
}

// A consumer that reads the header (as any would) and releases.
int64_t cshim_bench_consume(DLManagedTensorVersioned* m) {
	int64_t n = m->dl_tensor.shape[0];
	m->deleter(m);
	return n;
}

// The floor: n produce -> consume -> release cycles entirely in C.
int64_t cshim_bench_c_floor(int64_t n) {
	int64_t acc = 0;
	for (int64_t i = 0; i < n; i++) {
		DLManagedTensorVersioned* m = cshim_bench_make();
		__asm__ volatile("" : : "r"(m) : "memory");
		acc += cshim_bench_consume(m);
	}
	return acc;
}

// ---- Stress fixture: C threads that produce for Go and release Go's exports ----

#include <sched.h>

typedef struct {
	pthread_mutex_t mu;
	void** items;
	int cap, head, len;
} queue;

static int q_push(queue* q, void* p) {
	pthread_mutex_lock(&q->mu);
	int ok = q->len < q->cap;
	if (ok) {
		q->items[(q->head + q->len) % q->cap] = p;
		q->len++;
	}
	pthread_mutex_unlock(&q->mu);
	return ok;
}

static void* q_pop(queue* q) {
	void* p = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->len > 0) {
		p = q->items[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
	}
	pthread_mutex_unlock(&q->mu);
	return p;
}

static queue to_go, to_c;
static int64_t stress_made, stress_deleted, stress_released, stress_bad_sums;
static int producers_left, exports_done;
static pthread_t stress_threads[64];
static int stress_nthreads;

static void stress_deleter(DLManagedTensorVersioned* self) {
	__atomic_add_fetch(&stress_deleted, 1, __ATOMIC_SEQ_CST);
	free(self);
}

typedef struct {
	DLManagedTensorVersioned m;
	int64_t shape[1], strides[1];
	float data[4];
} stress_tensor;

static void* producer(void* arg) {
	int n = (int)(intptr_t)arg;
	for (int i = 0; i < n; i++) {
		stress_tensor* t = calloc(1, sizeof *t);
		for (int j = 0; j < 4; j++) t->data[j] = (float)(j + 1);
		t->shape[0] = 4; t->strides[0] = 1;
		t->m.version.major = 1; t->m.version.minor = 3;
		t->m.deleter = stress_deleter;
		t->m.dl_tensor.data = t->data;
		t->m.dl_tensor.device.device_type = kDLCPU;
		t->m.dl_tensor.ndim = 1;
		t->m.dl_tensor.dtype.code = kDLFloat; t->m.dl_tensor.dtype.bits = 32; t->m.dl_tensor.dtype.lanes = 1;
		t->m.dl_tensor.shape = t->shape; t->m.dl_tensor.strides = t->strides;
		__atomic_add_fetch(&stress_made, 1, __ATOMIC_SEQ_CST);
		while (!q_push(&to_go, &t->m)) sched_yield();
	}
	__atomic_sub_fetch(&producers_left, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

// Consumers read each Go export (sum must be 10) and release it; a thread
// exits right after its last release.
static void* consumer(void* arg) {
	(void)arg;
	for (;;) {
		DLManagedTensorVersioned* m = q_pop(&to_c);
		if (m == NULL) {
			if (__atomic_load_n(&exports_done, __ATOMIC_SEQ_CST) && __atomic_load_n(&to_c.len, __ATOMIC_SEQ_CST) == 0) {
				return NULL;
			}
			sched_yield();
			continue;
		}
		if (cshim_sum(&m->dl_tensor) != 10.0) {
			__atomic_add_fetch(&stress_bad_sums, 1, __ATOMIC_SEQ_CST);
		}
		m->deleter(m);
		__atomic_add_fetch(&stress_released, 1, __ATOMIC_SEQ_CST);
	}
}

int cshim_stress_start(int nproducers, int per_producer, int nconsumers) {
	static int inited;
	if (!inited) {
		pthread_mutex_init(&to_go.mu, NULL);
		pthread_mutex_init(&to_c.mu, NULL);
		to_go.cap = to_c.cap = 4096;
		to_go.items = malloc(sizeof(void*) * 4096);
		to_c.items = malloc(sizeof(void*) * 4096);
		inited = 1;
	}
	stress_made = stress_deleted = stress_released = stress_bad_sums = 0;
	exports_done = 0;
	producers_left = nproducers;
	stress_nthreads = 0;
	for (int i = 0; i < nproducers && stress_nthreads < 64; i++) {
		if (pthread_create(&stress_threads[stress_nthreads++], NULL, producer, (void*)(intptr_t)per_producer) != 0) return -1;
	}
	for (int i = 0; i < nconsumers && stress_nthreads < 64; i++) {
		if (pthread_create(&stress_threads[stress_nthreads++], NULL, consumer, NULL) != 0) return -1;
	}
	return 0;
}

void* cshim_stress_take(void) { return q_pop(&to_go); }
int cshim_stress_producers_left(void) { return __atomic_load_n(&producers_left, __ATOMIC_SEQ_CST); }
int cshim_stress_give(void* m) { return q_push(&to_c, m); }

void cshim_stress_finish(int64_t* made, int64_t* deleted, int64_t* released, int64_t* bad_sums) {
	__atomic_store_n(&exports_done, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < stress_nthreads; i++) pthread_join(stress_threads[i], NULL);
	*made = stress_made;
	*deleted = stress_deleted;
	*released = stress_released;
	*bad_sums = stress_bad_sums;
}

int64_t cshim_stress_deleted(void) { return __atomic_load_n(&stress_deleted, __ATOMIC_SEQ_CST); }

// ---- Exchange API fixtures ----------------------------------------------

#include <stdio.h>

typedef struct {
	char kind[64];
	char message[192];
	int calls;
} set_error_record;

static void record_error(void* ctx, const char* kind, const char* message) {
	set_error_record* r = (set_error_record*)ctx;
	r->calls++;
	snprintf(r->kind, sizeof r->kind, "%s", kind);
	snprintf(r->message, sizeof r->message, "%s", message);
}

#define CHECK(cond, ...) do { if (!(cond)) { snprintf(report, cap, __VA_ARGS__); return __LINE__; } } while (0)

// Exercises a table the way a C library would: returns 0 when every check
// holds, else the failing line with a description in report.
int cshim_exercise_table(const DLPackExchangeAPI* api, char* report, size_t cap) {
	CHECK(api->header.version.major == 1 && api->header.version.minor == 3, "version %u.%u",
	      api->header.version.major, api->header.version.minor);
	CHECK(api->header.prev_api == NULL, "prev_api not NULL");
	CHECK(api->managed_tensor_from_py_object_no_sync == NULL && api->managed_tensor_to_py_object_no_sync == NULL &&
	      api->dltensor_from_py_object_no_sync == NULL, "python entries not NULL");
	CHECK(api->managed_tensor_allocator != NULL && api->current_work_stream != NULL, "missing entries");

	int64_t shape[2] = {2, 3};
	DLTensor proto;
	memset(&proto, 0, sizeof proto);
	proto.device.device_type = kDLCPU;
	proto.ndim = 2;
	proto.shape = shape;
	proto.dtype.code = kDLFloat; proto.dtype.bits = 32; proto.dtype.lanes = 1;
	set_error_record rec = {{0}, {0}, 0};
	DLManagedTensorVersioned* m = NULL;
	CHECK(api->managed_tensor_allocator(&proto, &m, &rec, record_error) == 0 && m != NULL, "allocate failed: %s", rec.message);
	CHECK(rec.calls == 0, "SetError called on success");
	DLTensor* t = &m->dl_tensor;
	CHECK(m->version.major == 1 && m->version.minor == 3 && m->flags == 0, "managed version/flags");
	CHECK(t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->strides[0] == 3 && t->strides[1] == 1, "geometry");
	CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1, "dtype");
	CHECK(t->data != NULL && ((uintptr_t)t->data % 256) == 0 && t->byte_offset == 0, "data alignment");
	float* d = (float*)t->data;
	for (int i = 0; i < 6; i++) {
		CHECK(d[i] == 0, "not zeroed");
		d[i] = (float)i;
	}
	CHECK(cshim_sum(t) == 15.0, "sum");
	m->deleter(m);

	proto.ndim = 0;
	proto.shape = NULL;
	CHECK(api->managed_tensor_allocator(&proto, &m, &rec, record_error) == 0 && m->dl_tensor.ndim == 0, "0-d");
	m->deleter(m);

	proto.ndim = 2;
	proto.shape = shape;
	proto.device.device_type = kDLCUDA;
	m = (DLManagedTensorVersioned*)1;
	CHECK(api->managed_tensor_allocator(&proto, &m, &rec, record_error) == -1, "CUDA accepted");
	CHECK(m == NULL && rec.calls == 1 && strcmp(rec.kind, "BufferError") == 0, "CUDA error report: %d %s", rec.calls, rec.kind);
	proto.device.device_type = kDLCPU;
	shape[1] = -3;
	CHECK(api->managed_tensor_allocator(&proto, &m, &rec, record_error) == -1 && strcmp(rec.kind, "ValueError") == 0,
	      "negative dim: %s", rec.kind);
	CHECK(api->managed_tensor_allocator(&proto, &m, NULL, NULL) == -1, "NULL SetError must be tolerated");

	void* stream = (void*)1;
	CHECK(api->current_work_stream(kDLCPU, 0, &stream) == 0 && stream == NULL, "CPU stream");
	CHECK(api->current_work_stream(kDLCUDA, 0, &stream) == -1, "CUDA stream");
	snprintf(report, cap, "ok");
	return 0;
}

// A foreign library's tables: head v2.0 -> v1.3 (usable). Its allocator
// makes float32 tensors holding 0, 1, 2, ... counted in cshim_live and
// cshim_foreign_deletes; it refuses ndim > 4.
int64_t cshim_foreign_deletes;

static void foreign_deleter(DLManagedTensorVersioned* self) {
	__atomic_add_fetch(&cshim_foreign_deletes, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&cshim_live, 1, __ATOMIC_SEQ_CST);
	free(self->manager_ctx);
}

static int foreign_alloc(DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                         void (*SetError)(void*, const char*, const char*)) {
	if (proto->ndim > 4 || proto->dtype.code != kDLFloat || proto->dtype.bits != 32) {
		if (SetError) SetError(ctx, "ValueError", "foreign allocator: float32 up to 4-d only");
		return -1;
	}
	int64_t n = 1;
	for (int i = 0; i < proto->ndim; i++) n *= proto->shape[i];
	size_t sz = sizeof(DLManagedTensorVersioned) + 16 * 4 + (size_t)n * 4 + 64;
	char* blk = calloc(1, sz);
	DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)blk;
	int64_t* dims = (int64_t*)(m + 1);
	float* data = (float*)(dims + 8);
	int64_t acc = 1;
	for (int i = proto->ndim - 1; i >= 0; i--) {
		dims[i] = proto->shape[i];
		dims[4 + i] = acc;
		acc *= proto->shape[i];
	}
	for (int64_t i = 0; i < n; i++) data[i] = (float)i;
	m->version.major = 1; m->version.minor = 3;
	m->manager_ctx = blk;
	m->deleter = foreign_deleter;
	m->dl_tensor.data = data;
	m->dl_tensor.device = proto->device;
	m->dl_tensor.ndim = proto->ndim;
	m->dl_tensor.dtype = proto->dtype;
	m->dl_tensor.shape = dims;
	m->dl_tensor.strides = dims + 4;
	__atomic_add_fetch(&cshim_live, 1, __ATOMIC_SEQ_CST);
	*out = m;
	return 0;
}

static int foreign_stream(DLDeviceType t, int32_t id, void** out) {
	*out = t == kDLCUDA ? (void*)(uintptr_t)(0x1000 + id) : NULL;
	return 0;
}

static DLPackExchangeAPI foreign_v13 = {{{1, 3}, NULL}, foreign_alloc, NULL, NULL, NULL, foreign_stream};
static DLPackExchangeAPIHeader foreign_v20 = {{2, 0}, &foreign_v13.header};
static DLPackExchangeAPIHeader lonely_v20 = {{2, 0}, NULL};
static DLPackExchangeAPIHeader cyclic = {{0, 9}, &cyclic};

void* cshim_foreign_api(int which) {
	switch (which) {
	case 0: return &foreign_v20;
	case 1: return &lonely_v20;
	default: return &cyclic;
	}
}

// ---- More benchmark fixtures --------------------------------------------

typedef struct {
	DLManagedTensor m;
	int64_t shape[2], strides[2];
} bench_legacy_block;

static void bench_legacy_free(DLManagedTensor* self) { free(self); }

DLManagedTensor* cshim_bench_make_legacy(void) {
	bench_legacy_block* b = malloc(sizeof *b);
	memset(b, 0, sizeof *b);
	b->shape[0] = 32; b->shape[1] = 32;
	b->m.dl_tensor.data = bench_data;
	b->m.dl_tensor.device.device_type = kDLCPU;
	b->m.dl_tensor.ndim = 2;
	b->m.dl_tensor.dtype.code = kDLFloat; b->m.dl_tensor.dtype.bits = 32; b->m.dl_tensor.dtype.lanes = 1;
	b->m.dl_tensor.shape = b->shape; // NULL strides: legacy row-major
	b->m.deleter = bench_legacy_free;
	return &b->m;
}

// A 1-d uint8 tensor of n bytes over memory the caller owns (never touched).
DLManagedTensorVersioned* cshim_bench_make_over(void* data, int64_t n) {
	bench_block* b = malloc(sizeof *b);
	memset(b, 0, sizeof *b);
	b->shape[0] = n; b->strides[0] = 1;
	b->m.version.major = 1; b->m.version.minor = 3;
	b->m.deleter = bench_free;
	b->m.dl_tensor.data = data;
	b->m.dl_tensor.device.device_type = kDLCPU;
	b->m.dl_tensor.ndim = 1;
	b->m.dl_tensor.dtype.code = kDLUInt; b->m.dl_tensor.dtype.bits = 8; b->m.dl_tensor.dtype.lanes = 1;
	b->m.dl_tensor.shape = b->shape;
	b->m.dl_tensor.strides = b->strides;
	return &b->m;
}

// A persistent C-created thread that releases batches of tensors.
static pthread_mutex_t warm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t warm_cv = PTHREAD_COND_INITIALIZER;
static void** warm_batch;
static int warm_n, warm_started;

static void* warm_releaser(void* arg) {
	(void)arg;
	pthread_mutex_lock(&warm_mu);
	for (;;) {
		while (warm_n == 0) pthread_cond_wait(&warm_cv, &warm_mu);
		for (int i = 0; i < warm_n; i++) {
			DLManagedTensorVersioned* m = warm_batch[i];
			m->deleter(m);
		}
		warm_n = 0;
		pthread_cond_broadcast(&warm_cv);
	}
	return NULL;
}

// Releases the batch on the warm thread and waits until it is done.
void cshim_release_on_warm_thread(void** ptrs, int n) {
	pthread_mutex_lock(&warm_mu);
	if (!warm_started) {
		pthread_t th;
		pthread_create(&th, NULL, warm_releaser, NULL);
		pthread_detach(th);
		warm_started = 1;
	}
	warm_batch = ptrs;
	warm_n = n;
	pthread_cond_broadcast(&warm_cv);
	while (warm_n != 0) pthread_cond_wait(&warm_cv, &warm_mu);
	pthread_mutex_unlock(&warm_mu);
}
