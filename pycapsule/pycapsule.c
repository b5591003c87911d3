// CPython capsule handling for DLPack, resolved at run time (dlsym), so no
// Python headers or libraries are needed to build. Every function here
// must be called with the GIL held, except the capsule destructor, which
// Python itself calls with the GIL held.
#include <dlfcn.h>
#include <stddef.h>
#include "pycapsule.h"

typedef void* PyObj;
typedef void (*Destructor)(PyObj);

static PyObj (*p_New)(void*, const char*, Destructor);
static void* (*p_GetPointer)(PyObj, const char*);
static int (*p_IsValid)(PyObj, const char*);
static int (*p_SetName)(PyObj, const char*);
static void (*p_Fetch)(PyObj*, PyObj*, PyObj*);
static void (*p_Restore)(PyObj, PyObj, PyObj);
static void (*p_SetString)(PyObj, const char*);
static PyObj* p_BufferError;
static PyObj* p_ValueError;

static const char NAME_V[] = "dltensor_versioned";
static const char NAME_L[] = "dltensor";
static const char USED_V[] = "used_dltensor_versioned";
static const char USED_L[] = "used_dltensor";

int pycapsule_init(void) {
	if (p_New != NULL) {
		return 0;
	}
#define R(var, name) var = dlsym(RTLD_DEFAULT, name); if (var == NULL) return -1;
	R(p_GetPointer, "PyCapsule_GetPointer");
	R(p_IsValid, "PyCapsule_IsValid");
	R(p_SetName, "PyCapsule_SetName");
	R(p_Fetch, "PyErr_Fetch");
	R(p_Restore, "PyErr_Restore");
	R(p_SetString, "PyErr_SetString");
	R(p_BufferError, "PyExc_BufferError");
	R(p_ValueError, "PyExc_ValueError");
	R(p_New, "PyCapsule_New");
#undef R
	return 0;
}

// The destructor of capsules we create: a capsule never consumed still
// owns its tensor, so release it; a consumed one was renamed and belongs
// to its consumer. Pure C, no Python code runs, and a pending exception
// (the capsule may die while one propagates) is kept as it was.
static void destructor(PyObj cap) {
	PyObj t, v, tb;
	p_Fetch(&t, &v, &tb);
	if (p_IsValid(cap, NAME_V)) {
		DLManagedTensorVersioned* m = p_GetPointer(cap, NAME_V);
		if (m != NULL && m->deleter != NULL) {
			m->deleter(m);
		}
	} else if (p_IsValid(cap, NAME_L)) {
		DLManagedTensor* m = p_GetPointer(cap, NAME_L);
		if (m != NULL && m->deleter != NULL) {
			m->deleter(m);
		}
	}
	p_Restore(t, v, tb);
}

uintptr_t pycapsule_new(void* managed, int versioned) {
	return (uintptr_t)p_New(managed, versioned ? NAME_V : NAME_L, destructor);
}

// Takes the tensor out of a capsule and renames it used_*, so that its
// producer's destructor leaves it alone. Returns NULL with *err set: 1 not
// a DLPack capsule (or already consumed), 2 rename failed.
void* pycapsule_consume(uintptr_t capsule, int* versioned, int* err) {
	PyObj cap = (PyObj)capsule;
	*err = 0;
	const char* name = NULL;
	const char* used = NULL;
	if (p_IsValid(cap, NAME_V)) {
		name = NAME_V, used = USED_V, *versioned = 1;
	} else if (p_IsValid(cap, NAME_L)) {
		name = NAME_L, used = USED_L, *versioned = 0;
	} else {
		*err = 1;
		return NULL;
	}
	void* p = p_GetPointer(cap, name);
	if (p == NULL || p_SetName(cap, used) != 0) {
		*err = 2; // the capsule still owns the tensor
		return NULL;
	}
	return p;
}

void pycapsule_set_error(int buffer_error, const char* msg) {
	p_SetString(buffer_error ? *p_BufferError : *p_ValueError, msg);
}
