// A CPython interpreter started inside a Go test binary: libpython is
// loaded with dlopen(RTLD_GLOBAL), so package pycapsule finds its functions
// with dlsym exactly as it does in a Python process.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "pyembed.h"

typedef void* PyObj;
static void (*p_InitializeEx)(int);
static void* (*p_SaveThread)(void);
static int (*p_GILEnsure)(void);
static void (*p_GILRelease)(int);
static PyObj (*p_ImportAddModule)(const char*);
static PyObj (*p_ModuleGetDict)(PyObj);
static PyObj (*p_RunString)(const char*, int, PyObj, PyObj);
static PyObj (*p_DictGetItemString)(PyObj, const char*);
static int (*p_DictSetItemString)(PyObj, const char*, PyObj);
static void (*p_DecRef)(PyObj);
static PyObj (*p_Occurred)(void);
static void (*p_Fetch)(PyObj*, PyObj*, PyObj*);
static void (*p_Normalize)(PyObj*, PyObj*, PyObj*);
static void (*p_Restore)(PyObj, PyObj, PyObj);
static PyObj (*p_Str)(PyObj);
static const char* (*p_AsUTF8)(PyObj);
static PyObj (*p_GetAttrString)(PyObj, const char*);
static void (*p_Clear)(void);

static PyObj globals;

// Py_file_input and Py_eval_input of CPython's compile modes.
enum { FILE_INPUT = 257, EVAL_INPUT = 258 };

int pyembed_start(const char* libpython, char* err, size_t n) {
	void* h = dlopen(libpython, RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL) {
		snprintf(err, n, "%s", dlerror());
		return -1;
	}
#define R(var, name) var = dlsym(h, name); if (var == NULL) { snprintf(err, n, "no %s", name); return -1; }
	R(p_InitializeEx, "Py_InitializeEx");
	R(p_SaveThread, "PyEval_SaveThread");
	R(p_GILEnsure, "PyGILState_Ensure");
	R(p_GILRelease, "PyGILState_Release");
	R(p_ImportAddModule, "PyImport_AddModule");
	R(p_ModuleGetDict, "PyModule_GetDict");
	R(p_RunString, "PyRun_String");
	R(p_DictGetItemString, "PyDict_GetItemString");
	R(p_DictSetItemString, "PyDict_SetItemString");
	R(p_DecRef, "Py_DecRef");
	R(p_Occurred, "PyErr_Occurred");
	R(p_Fetch, "PyErr_Fetch");
	R(p_Normalize, "PyErr_NormalizeException");
	R(p_Restore, "PyErr_Restore");
	R(p_Str, "PyObject_Str");
	R(p_AsUTF8, "PyUnicode_AsUTF8");
	R(p_GetAttrString, "PyObject_GetAttrString");
	R(p_Clear, "PyErr_Clear");
#undef R
	p_InitializeEx(0);
	globals = p_ModuleGetDict(p_ImportAddModule("__main__"));
	p_SaveThread(); // the GIL is taken per call, by pyembed_ensure
	return 0;
}

int pyembed_ensure(void) { return p_GILEnsure(); }

void pyembed_release(int state) { p_GILRelease(state); }

// Writes "TypeName: message" of the pending exception to buf and clears
// it (clear != 0) or leaves it pending.
void pyembed_error(char* buf, size_t n, int clear) {
	buf[0] = 0;
	PyObj t, v, tb;
	p_Fetch(&t, &v, &tb);
	if (t == NULL) {
		return;
	}
	p_Normalize(&t, &v, &tb);
	PyObj name = p_GetAttrString(t, "__name__");
	PyObj s = v != NULL ? p_Str(v) : NULL;
	const char* tn = name != NULL ? p_AsUTF8(name) : NULL;
	const char* msg = s != NULL ? p_AsUTF8(s) : NULL;
	snprintf(buf, n, "%s: %s", tn != NULL ? tn : "?", msg != NULL ? msg : "");
	if (s != NULL) p_DecRef(s);
	if (name != NULL) p_DecRef(name);
	p_Clear();
	if (clear) {
		if (t != NULL) p_DecRef(t);
		if (v != NULL) p_DecRef(v);
		if (tb != NULL) p_DecRef(tb);
	} else {
		p_Restore(t, v, tb);
	}
}

// Runs code in __main__ (eval != 0: evaluates an expression and returns a
// new reference to its value). Returns 0 (and NULL) with the exception
// pending on failure.
uintptr_t pyembed_run(const char* code, int eval, int* ok) {
	PyObj r = p_RunString(code, eval ? EVAL_INPUT : FILE_INPUT, globals, globals);
	*ok = r != NULL;
	if (r != NULL && !eval) {
		p_DecRef(r);
		return 0;
	}
	return (uintptr_t)r;
}

uintptr_t pyembed_global(const char* name) { return (uintptr_t)p_DictGetItemString(globals, name); }

int pyembed_set_global(const char* name, uintptr_t obj) { return p_DictSetItemString(globals, name, (PyObj)obj); }

void pyembed_decref(uintptr_t obj) { p_DecRef((PyObj)obj); }

int pyembed_pending(void) { return p_Occurred() != NULL; }

#ifdef __SANITIZE_ADDRESS__
// Under -asan, the leak check at exit would report what the interpreter
// (never finalized) and the extension modules it loaded still hold. Those
// allocations are Python's, made with libpython or an extension module on
// the stack; ours are counted by internal/leakcheck instead.
const char* __lsan_default_suppressions(void) {
	return "leak:libpython\nleak:site-packages\nleak:lib-dynload\n";
}
#endif
