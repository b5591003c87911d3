#include <stddef.h>
#include <stdint.h>
int pyembed_start(const char* libpython, char* err, size_t n);
int pyembed_ensure(void);
void pyembed_release(int state);
void pyembed_error(char* buf, size_t n, int clear);
uintptr_t pyembed_run(const char* code, int eval, int* ok);
uintptr_t pyembed_global(const char* name);
int pyembed_set_global(const char* name, uintptr_t obj);
void pyembed_decref(uintptr_t obj);
int pyembed_pending(void);
