#ifndef GODLPACK_PYCAPSULE_EXCHANGE_H_
#define GODLPACK_PYCAPSULE_EXCHANGE_H_
#include <stddef.h>
#include <stdint.h>
#include "dlpack/dlpack.h"

// How many Python types one library can publish a table for.
enum { EXCHANGE_SLOTS = 8 };

enum { EXCHANGE_BUFFER_ERROR = 0, EXCHANGE_TYPE_ERROR = 1, EXCHANGE_VALUE_ERROR = 2 };

// Calls of the entries of every published table, exports made for
// objects, exports and lent tensors still alive (relaxed atomics).
typedef struct {
	int64_t from_py, to_py, dltensor, alloc, stream, failures, exports, exports_live, lent_live;
} exchange_counts;

int exchange_init(void);
int exchange_publish(int slot, uintptr_t type, uintptr_t allocator);
DLPackExchangeAPI* exchange_table(int slot);
int exchange_is_ours(int slot, uintptr_t obj);
void exchange_read_counts(exchange_counts* out);
void exchange_set_error(int kind, const char* msg);
int exchange_error_pending(void);
void* exchange_api_of(uintptr_t obj);
int exchange_call_from_py(uintptr_t fn, uintptr_t obj, DLManagedTensorVersioned** out);
int exchange_call_to_py(uintptr_t fn, DLManagedTensorVersioned* m, uintptr_t* out);
int exchange_call_dltensor(uintptr_t fn, uintptr_t obj, DLTensor* out);
uintptr_t exchange_call_int(uintptr_t callable, long long x);
uintptr_t exchange_intern(const char* name, size_t n);
int exchange_int_attr(uintptr_t obj, uintptr_t name, long long* out);
void exchange_decref(uintptr_t obj);
#endif
