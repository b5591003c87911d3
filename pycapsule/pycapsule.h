#ifndef GODLPACK_PYCAPSULE_H_
#define GODLPACK_PYCAPSULE_H_
#include <stdint.h>
#include "dlpack/dlpack.h"
int pycapsule_init(void);
uintptr_t pycapsule_new(void* managed, int versioned);
void* pycapsule_consume(uintptr_t capsule, int* versioned, int* err);
void pycapsule_set_error(int buffer_error, const char* msg);
#endif
