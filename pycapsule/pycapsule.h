#ifndef GODLPACK_PYCAPSULE_H_
#define GODLPACK_PYCAPSULE_H_
#include <stddef.h>
#include <stdint.h>
#include "dlpack/dlpack.h"

enum {
	PYCAPSULE_VALUE_ERROR = 0,
	PYCAPSULE_BUFFER_ERROR = 1,
	PYCAPSULE_TYPE_ERROR = 2,
	PYCAPSULE_OVERFLOW_ERROR = 3,
	PYCAPSULE_RUNTIME_ERROR = 4,
};

// The keywords of a __dlpack__ call: stream if has_stream, max_version if
// major >= 1, dl_device if has_device, copy if copy >= 0.
typedef struct {
	int has_stream;
	long long stream;
	long long major, minor;
	int has_device;
	long long device_type, device_id;
	int copy;
} pycapsule_args;

int pycapsule_init(void);
uintptr_t pycapsule_new(void* managed, int versioned);
int pycapsule_kind(uintptr_t obj);
void* pycapsule_consume(uintptr_t capsule, int* versioned, int* err);
void pycapsule_set_error(int kind, const char* msg);
int pycapsule_gil_held(void);
uintptr_t pycapsule_no_gil(const char* msg);
int pycapsule_error_pending(void);
void pycapsule_clear_error(void);
void pycapsule_incref(uintptr_t obj);
void pycapsule_decref(uintptr_t obj);
void pycapsule_error_text(char* buf, size_t n);
void pycapsule_repr(uintptr_t obj, char* buf, size_t n);
int pycapsule_is_none(uintptr_t obj);
int pycapsule_int(uintptr_t obj, long long* out);
int pycapsule_int_pair(uintptr_t obj, long long* a, long long* b);
int pycapsule_bool(uintptr_t obj);
uintptr_t pycapsule_pair(long long a, long long b);
uintptr_t pycapsule_call_dlpack(uintptr_t obj, const pycapsule_args* a, int* state);
int pycapsule_call_device(uintptr_t obj, long long* type, long long* id);
#endif
