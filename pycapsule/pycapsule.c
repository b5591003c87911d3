// CPython capsule handling for DLPack, resolved at run time (dlsym), so no
// Python headers or libraries are needed to build. Every function here
// must be called with the GIL held, except the capsule destructor, which
// Python itself calls with the GIL held. Only functions of CPython's stable
// ABI are used, and no object's layout is read.
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "pycapsule.h"

typedef void* PyObj;
typedef void (*Destructor)(PyObj);

static PyObj (*p_New)(void*, const char*, Destructor);
static int (*p_GILCheck)(void);
static int (*p_GILEnsure)(void);
static void (*p_GILRelease)(int);
static void* (*p_GetPointer)(PyObj, const char*);
static int (*p_IsValid)(PyObj, const char*);
static int (*p_SetName)(PyObj, const char*);
static void (*p_Fetch)(PyObj*, PyObj*, PyObj*);
static void (*p_Restore)(PyObj, PyObj, PyObj);
static void (*p_Normalize)(PyObj*, PyObj*, PyObj*);
static void (*p_SetString)(PyObj, const char*);
static PyObj (*p_Occurred)(void);
static void (*p_Clear)(void);
static int (*p_ExceptionMatches)(PyObj);
static void (*p_IncRef)(PyObj);
static void (*p_DecRef)(PyObj);
static PyObj (*p_GetAttrString)(PyObj, const char*);
static int (*p_HasAttrString)(PyObj, const char*);
static PyObj (*p_Call)(PyObj, PyObj, PyObj);
static PyObj (*p_Str)(PyObj);
static PyObj (*p_Repr)(PyObj);
static const char* (*p_AsUTF8)(PyObj);
static int (*p_IsInstance)(PyObj, PyObj);
static int (*p_IsTrue)(PyObj);
static PyObj (*p_TupleNew)(ptrdiff_t);
static ptrdiff_t (*p_TupleSize)(PyObj);
static PyObj (*p_TupleGetItem)(PyObj, ptrdiff_t);
static int (*p_TupleSetItem)(PyObj, ptrdiff_t, PyObj);
static PyObj (*p_DictNew)(void);
static int (*p_DictSetItemString)(PyObj, const char*, PyObj);
static PyObj (*p_LongFromLongLong)(long long);
static long long (*p_LongAsLongLong)(PyObj);
static PyObj (*p_BoolFromLong)(long);
static PyObj p_None;
static PyObj p_True;
static PyObj p_False;
static PyObj p_TupleType;
static PyObj* p_BufferError;
static PyObj* p_ValueError;
static PyObj* p_TypeError;
static PyObj* p_OverflowError;
static PyObj* p_RuntimeError;

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
	R(p_Normalize, "PyErr_NormalizeException");
	R(p_SetString, "PyErr_SetString");
	R(p_Occurred, "PyErr_Occurred");
	R(p_Clear, "PyErr_Clear");
	R(p_ExceptionMatches, "PyErr_ExceptionMatches");
	R(p_IncRef, "Py_IncRef");
	R(p_DecRef, "Py_DecRef");
	R(p_GetAttrString, "PyObject_GetAttrString");
	R(p_HasAttrString, "PyObject_HasAttrString");
	R(p_Call, "PyObject_Call");
	R(p_Str, "PyObject_Str");
	R(p_Repr, "PyObject_Repr");
	R(p_AsUTF8, "PyUnicode_AsUTF8");
	R(p_IsInstance, "PyObject_IsInstance");
	R(p_IsTrue, "PyObject_IsTrue");
	R(p_TupleNew, "PyTuple_New");
	R(p_TupleSize, "PyTuple_Size");
	R(p_TupleGetItem, "PyTuple_GetItem");
	R(p_TupleSetItem, "PyTuple_SetItem");
	R(p_DictNew, "PyDict_New");
	R(p_DictSetItemString, "PyDict_SetItemString");
	R(p_LongFromLongLong, "PyLong_FromLongLong");
	R(p_LongAsLongLong, "PyLong_AsLongLong");
	R(p_BoolFromLong, "PyBool_FromLong");
	R(p_None, "_Py_NoneStruct");
	R(p_True, "_Py_TrueStruct");
	R(p_False, "_Py_FalseStruct");
	R(p_TupleType, "PyTuple_Type");
	R(p_BufferError, "PyExc_BufferError");
	R(p_ValueError, "PyExc_ValueError");
	R(p_TypeError, "PyExc_TypeError");
	R(p_OverflowError, "PyExc_OverflowError");
	R(p_RuntimeError, "PyExc_RuntimeError");
	R(p_GILCheck, "PyGILState_Check");
	R(p_GILEnsure, "PyGILState_Ensure");
	R(p_GILRelease, "PyGILState_Release");
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

int pycapsule_kind(uintptr_t obj) {
	PyObj o = (PyObj)obj;
	if (p_IsValid(o, NAME_V) || p_IsValid(o, NAME_L)) {
		return 1;
	}
	if (p_IsValid(o, USED_V) || p_IsValid(o, USED_L)) {
		return 2;
	}
	// PyCapsule_IsValid sets no exception for objects that are not capsules.
	return 0;
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
		p_Clear();
		*err = 2; // the capsule still owns the tensor
		return NULL;
	}
	return p;
}

void pycapsule_set_error(int kind, const char* msg) {
	PyObj* exc = p_ValueError;
	switch (kind) {
	case PYCAPSULE_BUFFER_ERROR:
		exc = p_BufferError;
		break;
	case PYCAPSULE_TYPE_ERROR:
		exc = p_TypeError;
		break;
	case PYCAPSULE_OVERFLOW_ERROR:
		exc = p_OverflowError;
		break;
	case PYCAPSULE_RUNTIME_ERROR:
		exc = p_RuntimeError;
		break;
	}
	if (p_GILCheck()) {
		p_SetString(*exc, msg);
		return;
	}
	// Called without the GIL (a library loaded with ctypes.CDLL): take it
	// to set the exception, which stays with this thread's state for the
	// caller to find once it has the GIL back.
	int s = p_GILEnsure();
	p_SetString(*exc, msg);
	p_GILRelease(s);
}

// For an entry point that returns an object, called without the GIL: the
// RuntimeError is set (taking the GIL for it) and a new reference to None
// returned, because ctypes.CDLL crashes on a NULL py_object result
// (CPython 3.11's GetResult drops the reference it did not get); CPython
// then reports the pending exception as the cause of a SystemError.
uintptr_t pycapsule_no_gil(const char* msg) {
	int s = p_GILEnsure();
	p_SetString(*p_RuntimeError, msg);
	p_IncRef(p_None);
	p_GILRelease(s);
	return (uintptr_t)p_None;
}

// 1 if this thread holds the GIL, 0 if not, -1 before pycapsule_init.
int pycapsule_gil_held(void) { return p_GILCheck == NULL ? -1 : p_GILCheck() != 0; }

int pycapsule_error_pending(void) { return p_Occurred() != NULL; }

void pycapsule_clear_error(void) { p_Clear(); }

void pycapsule_incref(uintptr_t obj) { p_IncRef((PyObj)obj); }

void pycapsule_decref(uintptr_t obj) { p_DecRef((PyObj)obj); }

// Writes "TypeName: message" of the pending exception to buf (n bytes,
// NUL-terminated) and leaves the exception pending.
void pycapsule_error_text(char* buf, size_t n) {
	buf[0] = 0;
	PyObj t, v, tb;
	p_Fetch(&t, &v, &tb);
	if (t == NULL) {
		return;
	}
	p_Normalize(&t, &v, &tb);
	const char* tname = "exception";
	PyObj name = p_GetAttrString(t, "__name__");
	if (name != NULL && p_AsUTF8(name) != NULL) {
		tname = p_AsUTF8(name);
	}
	PyObj s = v != NULL ? p_Str(v) : NULL;
	const char* msg = s != NULL ? p_AsUTF8(s) : NULL;
	snprintf(buf, n, "%s: %s", tname, msg != NULL ? msg : "");
	if (s != NULL) {
		p_DecRef(s);
	}
	if (name != NULL) {
		p_DecRef(name);
	}
	p_Clear(); // anything the lines above raised
	p_Restore(t, v, tb);
}

// Writes repr(obj) to buf (n bytes, NUL-terminated); no exception is left.
void pycapsule_repr(uintptr_t obj, char* buf, size_t n) {
	buf[0] = 0;
	PyObj t, v, tb;
	p_Fetch(&t, &v, &tb);
	PyObj r = p_Repr((PyObj)obj);
	const char* s = r != NULL ? p_AsUTF8(r) : NULL;
	snprintf(buf, n, "%s", s != NULL ? s : "<unprintable>");
	if (r != NULL) {
		p_DecRef(r);
	}
	p_Clear();
	p_Restore(t, v, tb);
}

int pycapsule_is_none(uintptr_t obj) { return (PyObj)obj == p_None; }

// Reads a Python int (anything with __index__); 0 on success, -1 if obj
// is not one, -2 if it does not fit a long long. No exception is left.
int pycapsule_int(uintptr_t obj, long long* out) {
	long long x = p_LongAsLongLong((PyObj)obj);
	if (x == -1 && p_Occurred() != NULL) {
		int overflow = p_ExceptionMatches(*p_OverflowError);
		p_Clear();
		return overflow ? -2 : -1;
	}
	*out = x;
	return 0;
}

// Reads a tuple of two ints. Returns 0 on success; -1 if obj is not a
// tuple of two elements, -2 if an element is not an int, -3 if one does
// not fit a long long. No exception is left.
int pycapsule_int_pair(uintptr_t obj, long long* a, long long* b) {
	PyObj o = (PyObj)obj;
	int r = p_IsInstance(o, p_TupleType);
	if (r < 0) {
		p_Clear();
	}
	if (r != 1 || p_TupleSize(o) != 2) {
		return -1;
	}
	int ra = pycapsule_int((uintptr_t)p_TupleGetItem(o, 0), a);
	int rb = ra == 0 ? pycapsule_int((uintptr_t)p_TupleGetItem(o, 1), b) : 0;
	if (ra == -1 || rb == -1) {
		return -2;
	}
	if (ra == -2 || rb == -2) {
		return -3;
	}
	return 0;
}

// 1 for True, 0 for False, -1 for anything else (even a value with a
// truth value: the array API's copy is a bool).
int pycapsule_bool(uintptr_t obj) {
	PyObj o = (PyObj)obj;
	return o == p_True ? 1 : o == p_False ? 0 : -1;
}

static PyObj pair(long long a, long long b) {
	PyObj t = p_TupleNew(2);
	if (t == NULL) {
		return NULL;
	}
	PyObj x = p_LongFromLongLong(a);
	if (x == NULL || p_TupleSetItem(t, 0, x) != 0) {
		p_DecRef(t);
		return NULL;
	}
	PyObj y = p_LongFromLongLong(b);
	if (y == NULL || p_TupleSetItem(t, 1, y) != 0) {
		p_DecRef(t);
		return NULL;
	}
	return t;
}

uintptr_t pycapsule_pair(long long a, long long b) { return (uintptr_t)pair(a, b); }

// Sets d[key] = value and drops the reference to value (which may be NULL
// after a failed constructor). Returns 0, or -1 with an exception set.
static int set_item(PyObj d, const char* key, PyObj value) {
	if (value == NULL) {
		return -1;
	}
	int r = p_DictSetItemString(d, key, value);
	p_DecRef(value);
	return r;
}

static PyObj call_with(PyObj meth, const pycapsule_args* a, int with_version) {
	PyObj args = p_TupleNew(0);
	PyObj kw = p_DictNew();
	PyObj r = NULL;
	if (args == NULL || kw == NULL) {
		goto out;
	}
	if (a->has_stream && set_item(kw, "stream", p_LongFromLongLong(a->stream)) != 0) {
		goto out;
	}
	if (with_version && set_item(kw, "max_version", pair(a->major, a->minor)) != 0) {
		goto out;
	}
	if (a->has_device && set_item(kw, "dl_device", pair(a->device_type, a->device_id)) != 0) {
		goto out;
	}
	if (a->copy >= 0 && set_item(kw, "copy", p_BoolFromLong(a->copy)) != 0) {
		goto out;
	}
	r = p_Call(meth, args, kw);
out:
	if (args != NULL) {
		p_DecRef(args);
	}
	if (kw != NULL) {
		p_DecRef(kw);
	}
	return r;
}

// Calls obj.__dlpack__ with the keywords a asks for and returns its result
// (a new reference). If the call raises TypeError and a asks for
// max_version but neither copy nor dl_device, it is retried without
// max_version: the array API's rule for producers that predate it (NumPy
// 2.0, pyarrow 25). Returns 0 with *state 1 (nothing pending) when obj
// has no __dlpack__, 2 with the exception pending when the call failed.
uintptr_t pycapsule_call_dlpack(uintptr_t obj, const pycapsule_args* a, int* state) {
	*state = 0;
	PyObj meth = p_GetAttrString((PyObj)obj, "__dlpack__");
	if (meth == NULL) {
		p_Clear();
		*state = 1;
		return 0;
	}
	int versioned = a->major >= 1;
	PyObj r = call_with(meth, a, versioned);
	if (r == NULL && versioned && a->copy < 0 && !a->has_device && p_ExceptionMatches(*p_TypeError)) {
		p_Clear();
		r = call_with(meth, a, 0);
	}
	p_DecRef(meth);
	if (r == NULL) {
		*state = 2;
	}
	return (uintptr_t)r;
}

// Calls obj.__dlpack_device__() and reads its (type, id). Returns 0; 1
// (nothing pending) when obj has no __dlpack_device__; 2 with the
// exception pending when the call failed; 3 (nothing pending) when it
// returned something other than a tuple of two ints.
int pycapsule_call_device(uintptr_t obj, long long* type, long long* id) {
	if (!p_HasAttrString((PyObj)obj, "__dlpack_device__")) {
		return 1;
	}
	PyObj meth = p_GetAttrString((PyObj)obj, "__dlpack_device__");
	if (meth == NULL) {
		return 2;
	}
	PyObj args = p_TupleNew(0);
	PyObj r = args != NULL ? p_Call(meth, args, NULL) : NULL;
	p_DecRef(meth);
	if (args != NULL) {
		p_DecRef(args);
	}
	if (r == NULL) {
		return 2;
	}
	int rc = pycapsule_int_pair((uintptr_t)r, type, id) == 0 ? 0 : 3;
	p_DecRef(r);
	return rc;
}
