#ifndef CSHIM_H_
#define CSHIM_H_
#include <stddef.h>
#include <stdint.h>
#include "dlpack/dlpack.h"

#define CSHIM_SLOTS 65536
#define CSHIM_MAXDIMS 80

extern int64_t cshim_deletes[CSHIM_SLOTS];
extern int64_t cshim_live;

typedef struct {
	int slot;
	int legacy;
	uint32_t major, minor;
	uint64_t flags;
	int null_deleter;
	int32_t device_type, device_id;
	int32_t ndim;
	uint8_t code, bits;
	uint16_t lanes;
	int nshape;
	const int64_t* shape;
	int shape_null;
	const int64_t* strides;
	int strides_given;
	uint64_t byte_offset;
	const void* data;
	size_t data_len;
	size_t data_shift;
	int alloc_data;
	uintptr_t data_addr;
} cshim_spec;

typedef struct {
	const char* name;
	size_t offset;
	size_t size;
} cshim_field;

void* cshim_make(const cshim_spec* s);
void cshim_free_unmanaged(void* p);
double cshim_sum(const DLTensor* t);
void cshim_call_versioned(DLManagedTensorVersioned* m);
void cshim_call_legacy(DLManagedTensor* m);
int cshim_release_on_threads(void** ptrs, int n, int nthreads, int legacy);
size_t cshim_layout(cshim_field* out, size_t cap);
void* cshim_fake_block(size_t n);
void cshim_poison_free(size_t n);
DLManagedTensorVersioned* cshim_bench_make(void);
void cshim_bench_make_batch(void** out, int n);
int64_t cshim_bench_consume(DLManagedTensorVersioned* m);
int64_t cshim_bench_c_floor(int64_t n);
int cshim_stress_start(int nproducers, int per_producer, int nconsumers);
void* cshim_stress_take(void);
int cshim_stress_producers_left(void);
int cshim_stress_give(void* m);
void cshim_stress_finish(int64_t* made, int64_t* deleted, int64_t* released, int64_t* bad_sums);
int64_t cshim_stress_deleted(void);
int cshim_exercise_table(const DLPackExchangeAPI* api, char* report, size_t cap);
extern int64_t cshim_foreign_deletes;
void* cshim_foreign_api(int which);
DLManagedTensor* cshim_bench_make_legacy(void);
DLManagedTensorVersioned* cshim_bench_make_over(void* data, int64_t n);
void cshim_release_on_warm_thread(void** ptrs, int n);
#endif
