// The DLPack 1.3 exchange API in a Python process: the tables this library
// publishes on Python types (__dlpack_c_exchange_api__), and the calls into
// other libraries' tables. CPython is found at run time (dlsym), as in
// pycapsule.c. Every function here runs with the GIL held: the spec rules
// that the Python-object entries are called with it.
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "exchange.h"
#include "_cgo_export.h"

typedef void* PyObj;
typedef void (*Destructor)(PyObj);

static PyObj (*p_CapsuleNew)(void*, const char*, Destructor);
static void* (*p_CapsuleGetPointer)(PyObj, const char*);
static int (*p_CapsuleIsValid)(PyObj, const char*);
static PyObj (*p_GetAttr)(PyObj, PyObj);
static int (*p_SetAttr)(PyObj, PyObj, PyObj);
static PyObj (*p_Type)(PyObj);
static int (*p_IsSubtype)(PyObj, PyObj);
static PyObj (*p_InternFromString)(const char*);
static PyObj (*p_FromStringAndSize)(const char*, ptrdiff_t);
static void (*p_InternInPlace)(PyObj*);
static PyObj (*p_LongFromLongLong)(long long);
static long long (*p_LongAsLongLong)(PyObj);
static PyObj (*p_CallOneArg)(PyObj, ...);
static void (*p_IncRef)(PyObj);
static void (*p_DecRef)(PyObj);
static PyObj (*p_Occurred)(void);
static void (*p_Clear)(void);
static void (*p_Fetch)(PyObj*, PyObj*, PyObj*);
static void (*p_Restore)(PyObj, PyObj, PyObj);
static int (*p_ExceptionMatches)(PyObj);
static void (*p_SetString)(PyObj, const char*);
static PyObj* p_BufferError;
static PyObj* p_TypeError;
static PyObj* p_ValueError;
static PyObj* p_AttributeError;

static PyObj api_attr;  // "__dlpack_c_exchange_api__", interned
static PyObj cache_attr; // "_dlpack_c_export", interned

static const char API_NAME[] = "dlpack_exchange_api";
static const char CACHE_NAME[] = "godlpack_exchange_export";

int exchange_init(void) {
	if (cache_attr != NULL) {
		return 0;
	}
#define R(var, name) var = dlsym(RTLD_DEFAULT, name); if (var == NULL) return -1;
	R(p_CapsuleNew, "PyCapsule_New");
	R(p_CapsuleGetPointer, "PyCapsule_GetPointer");
	R(p_CapsuleIsValid, "PyCapsule_IsValid");
	R(p_GetAttr, "PyObject_GetAttr");
	R(p_SetAttr, "PyObject_SetAttr");
	R(p_Type, "PyObject_Type");
	R(p_IsSubtype, "PyType_IsSubtype");
	R(p_InternFromString, "PyUnicode_InternFromString");
	R(p_FromStringAndSize, "PyUnicode_FromStringAndSize");
	R(p_InternInPlace, "PyUnicode_InternInPlace");
	R(p_LongFromLongLong, "PyLong_FromLongLong");
	R(p_LongAsLongLong, "PyLong_AsLongLong");
	R(p_CallOneArg, "PyObject_CallFunctionObjArgs");
	R(p_IncRef, "Py_IncRef");
	R(p_DecRef, "Py_DecRef");
	R(p_Occurred, "PyErr_Occurred");
	R(p_Clear, "PyErr_Clear");
	R(p_Fetch, "PyErr_Fetch");
	R(p_Restore, "PyErr_Restore");
	R(p_ExceptionMatches, "PyErr_ExceptionMatches");
	R(p_SetString, "PyErr_SetString");
	R(p_BufferError, "PyExc_BufferError");
	R(p_TypeError, "PyExc_TypeError");
	R(p_ValueError, "PyExc_ValueError");
	R(p_AttributeError, "PyExc_AttributeError");
#undef R
	api_attr = p_InternFromString("__dlpack_c_exchange_api__");
	if (api_attr == NULL) {
		p_Clear();
		return -1;
	}
	cache_attr = p_InternFromString("_dlpack_c_export");
	if (cache_attr == NULL) {
		p_Clear();
		return -1;
	}
	return 0;
}

void exchange_set_error(int kind, const char* msg) {
	PyObj* exc = kind == EXCHANGE_TYPE_ERROR ? p_TypeError : kind == EXCHANGE_VALUE_ERROR ? p_ValueError : p_BufferError;
	p_SetString(*exc, msg);
}

int exchange_error_pending(void) { return p_Occurred() != NULL; }

void exchange_decref(uintptr_t obj) { p_DecRef((PyObj)obj); }

// ---- The tables this library publishes ------------------------------------

typedef struct {
	PyObj type; // a strong reference, kept for the process lifetime
	DLPackManagedTensorAllocator alloc;
} slot_info;

static slot_info slots[EXCHANGE_SLOTS];
static exchange_counts counts;

#define COUNT(field) __atomic_add_fetch(&counts.field, 1, __ATOMIC_RELAXED)

static int fail(int kind, const char* msg) {
	COUNT(failures);
	if (p_Occurred() == NULL) {
		exchange_set_error(kind, msg);
	}
	return -1;
}

// Reports whether obj is an instance of the slot's type (or of a subtype):
// the only objects the entries read. Anything else is refused.
static int is_ours(int slot, PyObj obj) {
	if (obj == NULL || slots[slot].type == NULL) {
		return 0;
	}
	PyObj t = p_Type(obj);
	int ok = t == slots[slot].type || p_IsSubtype(t, slots[slot].type);
	p_DecRef(t);
	return ok;
}

int exchange_is_ours(int slot, uintptr_t obj) { return is_ours(slot, (PyObj)obj); }

// Each object's tensor is exported once, on the first call of an entry
// for it, and kept in the object's attribute _dlpack_c_export: a capsule
// holding a holder, which counts one reference for the capsule and one
// for each tensor handed out. The last one to let go (the object's death,
// or the last consumer's deleter, on any thread) releases the export.
// Tensors handed out are small C blocks pointing at the export's data,
// shape and strides, with a pure-C deleter: after the first call no entry
// enters Go, and no deleter either.
typedef struct {
	int64_t refs;
	DLManagedTensorVersioned* export;
} holder;

typedef struct {
	holder* h;
	DLManagedTensorVersioned m;
} lent;

static void holder_unref(holder* h) {
	if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		DLManagedTensorVersioned* e = h->export;
		free(h);
		if (e->deleter != NULL) {
			e->deleter(e);
		}
		__atomic_sub_fetch(&counts.exports_live, 1, __ATOMIC_RELAXED);
	}
}

// Pure C, from any thread, GIL or not.
static void lent_deleter(DLManagedTensorVersioned* m) {
	lent* l = (lent*)((char*)m - offsetof(lent, m));
	holder* h = l->h;
	free(l);
	__atomic_sub_fetch(&counts.lent_live, 1, __ATOMIC_RELAXED);
	holder_unref(h);
}

// The object that held the capsule is gone (or dropped the attribute):
// its reference goes. A pending exception survives.
static void cache_destructor(PyObj cap) {
	PyObj t, v, tb;
	p_Fetch(&t, &v, &tb);
	holder* h = p_CapsuleGetPointer(cap, CACHE_NAME);
	if (h != NULL) {
		holder_unref(h);
	}
	p_Clear();
	p_Restore(t, v, tb);
}

// The holder of obj's export, with a reference for the caller; NULL with
// an exception set on failure.
static holder* export_of(int slot, PyObj obj) {
	PyObj cap = p_GetAttr(obj, cache_attr);
	if (cap == NULL) {
		if (!p_ExceptionMatches(*p_AttributeError)) {
			return NULL;
		}
		p_Clear();
	} else {
		holder* h = p_CapsuleIsValid(cap, CACHE_NAME) ? p_CapsuleGetPointer(cap, CACHE_NAME) : NULL;
		if (h != NULL) {
			__atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
		}
		p_DecRef(cap);
		if (h != NULL) {
			return h;
		}
		p_Clear(); // something else under our name: replaced below
	}
	DLManagedTensorVersioned* m = NULL;
	if (pycapsuleExchangeProduce(slot, (uintptr_t)obj, &m) != 0) {
		return NULL;
	}
	holder* h = malloc(sizeof *h);
	if (h == NULL) {
		if (m->deleter != NULL) {
			m->deleter(m);
		}
		exchange_set_error(EXCHANGE_BUFFER_ERROR, "out of memory");
		return NULL;
	}
	h->refs = 2; // the capsule's and the caller's
	h->export = m;
	COUNT(exports);
	__atomic_add_fetch(&counts.exports_live, 1, __ATOMIC_RELAXED);
	cap = p_CapsuleNew(h, CACHE_NAME, cache_destructor);
	if (cap == NULL) {
		holder_unref(h);
		holder_unref(h);
		return NULL;
	}
	int rc = p_SetAttr(obj, cache_attr, cap);
	p_DecRef(cap); // the object's reference keeps it; on failure this drops the capsule's
	if (rc != 0) {
		holder_unref(h);
		return NULL;
	}
	return h;
}

static int from_py(int slot, void* obj, DLManagedTensorVersioned** out) {
	COUNT(from_py);
	if (out == NULL) {
		return fail(EXCHANGE_VALUE_ERROR, "managed_tensor_from_py_object_no_sync: out is NULL");
	}
	*out = NULL;
	if (!is_ours(slot, obj)) {
		return fail(EXCHANGE_TYPE_ERROR, "managed_tensor_from_py_object_no_sync: not an object of the type this table was published for");
	}
	holder* h = export_of(slot, obj);
	if (h == NULL) {
		return fail(EXCHANGE_BUFFER_ERROR, "managed_tensor_from_py_object_no_sync failed");
	}
	lent* l = malloc(sizeof *l);
	if (l == NULL) {
		holder_unref(h);
		return fail(EXCHANGE_BUFFER_ERROR, "managed_tensor_from_py_object_no_sync: out of memory");
	}
	l->h = h;
	l->m = *h->export;
	l->m.manager_ctx = l;
	l->m.deleter = lent_deleter;
	l->m.flags &= ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED; // shared by every consumer of the object
	__atomic_add_fetch(&counts.lent_live, 1, __ATOMIC_RELAXED);
	*out = &l->m;
	return 0;
}

static int to_py(int slot, DLManagedTensorVersioned* m, void** out) {
	COUNT(to_py);
	if (out == NULL) {
		if (m != NULL && m->deleter != NULL) {
			m->deleter(m); // stolen: ours to release
		}
		return fail(EXCHANGE_VALUE_ERROR, "managed_tensor_to_py_object_no_sync: out is NULL");
	}
	*out = NULL;
	if (m == NULL) {
		return fail(EXCHANGE_VALUE_ERROR, "managed_tensor_to_py_object_no_sync: tensor is NULL");
	}
	uintptr_t obj = 0;
	if (pycapsuleExchangeToPy(slot, m, &obj) != 0) {
		return fail(EXCHANGE_BUFFER_ERROR, "managed_tensor_to_py_object_no_sync failed");
	}
	*out = (void*)obj;
	return 0;
}

// The non-owning DLTensor of an object: the export's, whose shape and
// strides live as long as the object (which holds the export). Read-only
// tensors are refused: a DLTensor has no flags to say so.
static int dltensor(int slot, void* obj, DLTensor* out) {
	COUNT(dltensor);
	if (out == NULL) {
		return fail(EXCHANGE_VALUE_ERROR, "dltensor_from_py_object_no_sync: out is NULL");
	}
	if (!is_ours(slot, obj)) {
		return fail(EXCHANGE_TYPE_ERROR, "dltensor_from_py_object_no_sync: not an object of the type this table was published for");
	}
	holder* h = export_of(slot, obj);
	if (h == NULL) {
		return fail(EXCHANGE_BUFFER_ERROR, "dltensor_from_py_object_no_sync failed");
	}
	int read_only = (h->export->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
	if (!read_only) {
		*out = h->export->dl_tensor;
	}
	holder_unref(h); // the object keeps its own reference
	if (read_only) {
		return fail(EXCHANGE_BUFFER_ERROR, "dltensor_from_py_object_no_sync: the tensor is read-only, which a DLTensor cannot say "
		                                   "(use managed_tensor_from_py_object_no_sync, which carries the flag)");
	}
	return 0;
}

static int alloc(int slot, DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                 void (*SetError)(void*, const char*, const char*)) {
	COUNT(alloc);
	int rc = slots[slot].alloc(proto, out, ctx, SetError);
	if (rc != 0) {
		COUNT(failures);
	}
	return rc;
}

// Go keeps no streams of its own: NULL, the default stream, for every
// device (what the spec allows a framework without streams). Failing for
// other devices would leave consumers that ignore the result (tvm-ffi)
// with a pending exception.
static int stream(int slot, DLDeviceType device_type, int32_t device_id, void** out) {
	(void)slot, (void)device_type, (void)device_id;
	COUNT(stream);
	if (out == NULL) {
		return fail(EXCHANGE_VALUE_ERROR, "current_work_stream: out is NULL");
	}
	*out = NULL;
	return 0;
}

#define SLOT(i)                                                                                         \
	static int from_py_##i(void* o, DLManagedTensorVersioned** out) { return from_py(i, o, out); }      \
	static int to_py_##i(DLManagedTensorVersioned* m, void** out) { return to_py(i, m, out); }          \
	static int dltensor_##i(void* o, DLTensor* out) { return dltensor(i, o, out); }                     \
	static int alloc_##i(DLTensor* p, DLManagedTensorVersioned** out, void* ctx,                        \
	                     void (*se)(void*, const char*, const char*)) { return alloc(i, p, out, ctx, se); } \
	static int stream_##i(DLDeviceType t, int32_t id, void** out) { return stream(i, t, id, out); }
SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7)
#undef SLOT

// Version 1.3 and no prev_api: prev_api chains older versions of the
// protocol, and these tables are the oldest this library offers.
#define TABLE(i) {{{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL}, alloc_##i, from_py_##i, to_py_##i, dltensor_##i, stream_##i}
static DLPackExchangeAPI tables[EXCHANGE_SLOTS] = {
	TABLE(0), TABLE(1), TABLE(2), TABLE(3), TABLE(4), TABLE(5), TABLE(6), TABLE(7),
};
#undef TABLE

DLPackExchangeAPI* exchange_table(int slot) { return &tables[slot]; }

// Binds a slot to a Python type and sets type.__dlpack_c_exchange_api__ to
// a "dlpack_exchange_api" capsule of its table (the table is static: it
// outlives the capsule, as the spec requires). Returns 0, or -1 with a
// Python exception set (the type refused the attribute).
int exchange_publish(int slot, uintptr_t type, uintptr_t allocator) {
	PyObj cap = p_CapsuleNew(&tables[slot], API_NAME, NULL);
	if (cap == NULL) {
		return -1;
	}
	int rc = p_SetAttr((PyObj)type, api_attr, cap);
	p_DecRef(cap);
	if (rc != 0) {
		return -1;
	}
	p_IncRef((PyObj)type);
	slots[slot].alloc = (DLPackManagedTensorAllocator)allocator;
	__atomic_store_n(&slots[slot].type, (PyObj)type, __ATOMIC_RELEASE);
	return 0;
}

void exchange_read_counts(exchange_counts* out) {
	out->from_py = __atomic_load_n(&counts.from_py, __ATOMIC_RELAXED);
	out->to_py = __atomic_load_n(&counts.to_py, __ATOMIC_RELAXED);
	out->dltensor = __atomic_load_n(&counts.dltensor, __ATOMIC_RELAXED);
	out->exports = __atomic_load_n(&counts.exports, __ATOMIC_RELAXED);
	out->exports_live = __atomic_load_n(&counts.exports_live, __ATOMIC_RELAXED);
	out->lent_live = __atomic_load_n(&counts.lent_live, __ATOMIC_RELAXED);
	out->alloc = __atomic_load_n(&counts.alloc, __ATOMIC_RELAXED);
	out->stream = __atomic_load_n(&counts.stream, __ATOMIC_RELAXED);
	out->failures = __atomic_load_n(&counts.failures, __ATOMIC_RELAXED);
}

// ---- Other libraries' tables ----------------------------------------------

// The DLPackExchangeAPI* that obj's type publishes in a capsule
// "dlpack_exchange_api" under __dlpack_c_exchange_api__, or NULL (no
// exception left) when it publishes none. The spec makes the pointer
// valid for the process lifetime, so the capsule need not be kept.
void* exchange_api_of(uintptr_t obj) {
	PyObj t = p_Type((PyObj)obj);
	PyObj cap = p_GetAttr(t, api_attr);
	p_DecRef(t);
	if (cap == NULL) {
		p_Clear();
		return NULL;
	}
	void* api = p_CapsuleIsValid(cap, API_NAME) ? p_CapsuleGetPointer(cap, API_NAME) : NULL;
	p_DecRef(cap);
	if (api == NULL) {
		p_Clear();
	}
	return api;
}

int exchange_call_from_py(uintptr_t fn, uintptr_t obj, DLManagedTensorVersioned** out) {
	*out = NULL;
	return ((DLPackManagedTensorFromPyObjectNoSync)fn)((void*)obj, out);
}

int exchange_call_to_py(uintptr_t fn, DLManagedTensorVersioned* m, uintptr_t* out) {
	void* o = NULL;
	int rc = ((DLPackManagedTensorToPyObjectNoSync)fn)(m, &o);
	*out = (uintptr_t)o;
	return rc;
}

int exchange_call_dltensor(uintptr_t fn, uintptr_t obj, DLTensor* out) {
	memset(out, 0, sizeof *out);
	return ((DLPackDLTensorFromPyObjectNoSync)fn)((void*)obj, out);
}

// ---- Small helpers for the callbacks of a published type ------------------

// callable(x): a new reference, or 0 with the exception pending.
uintptr_t exchange_call_int(uintptr_t callable, long long x) {
	PyObj arg = p_LongFromLongLong(x);
	if (arg == NULL) {
		return 0;
	}
	PyObj r = p_CallOneArg((PyObj)callable, arg, NULL);
	p_DecRef(arg);
	return (uintptr_t)r;
}

// The interned str of name (n bytes, not NUL-terminated): a new reference
// the caller keeps for good, or 0 with the exception pending.
uintptr_t exchange_intern(const char* name, size_t n) {
	PyObj s = p_FromStringAndSize(name, (ptrdiff_t)n);
	if (s != NULL) {
		p_InternInPlace(&s);
	}
	return (uintptr_t)s;
}

// Reads the int attribute name (an interned str) of obj. Returns 0, or -1
// with the exception pending.
int exchange_int_attr(uintptr_t obj, uintptr_t name, long long* out) {
	PyObj v = p_GetAttr((PyObj)obj, (PyObj)name);
	if (v == NULL) {
		return -1;
	}
	long long x = p_LongAsLongLong(v);
	p_DecRef(v);
	if (x == -1 && p_Occurred() != NULL) {
		return -1;
	}
	*out = x;
	return 0;
}
