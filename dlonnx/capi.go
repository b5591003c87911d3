//go:build cgo

package dlonnx

// The few entries of ONNX Runtime's C API this package calls itself,
// declared here from the documented ABI rather than from
// onnxruntime_c_api.h: OrtGetApiBase returns an OrtApiBase
// {GetApi(version), GetVersionString()}; GetApi returns the OrtApi table,
// a struct of function pointers that only ever grows at its end, so an
// entry's index is fixed for every later version. Every entry returns an
// OrtStatus* (NULL on success) except the Release functions. The indices
// below are those of ORT_API_VERSION 24 (ONNX Runtime 1.24), the version
// onnxruntime_go v1.27.0 asks for.
//
// The library is the one onnxruntime_go loaded: it is found among the
// loaded objects (dl_iterate_phdr; on macOS the dyld image list, written
// but not tested here) as the one exporting OrtGetApiBase, and
// opened again with RTLD_NOLOAD, which takes a reference without loading
// anything. That reference keeps the library mapped while any value this
// package made is alive, so a release after ort.DestroyEnvironment (which
// dlcloses onnxruntime_go's handle) still finds the code it calls.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>
#else
#include <link.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void dlonnx_status;

enum {
	ORT_API_VERSION_USED = 24,
	SLOT_GetErrorMessage = 2,
	SLOT_CreateEnv = 3,
	SLOT_CreateSessionFromArray = 8,
	SLOT_Run = 9,
	SLOT_CreateSessionOptions = 10,
	SLOT_SetIntraOpNumThreads = 24,
	SLOT_SessionGetInputCount = 30,
	SLOT_SessionGetOutputCount = 31,
	SLOT_SessionGetInputTypeInfo = 33,
	SLOT_SessionGetOutputTypeInfo = 34,
	SLOT_SessionGetInputName = 36,
	SLOT_SessionGetOutputName = 37,
	SLOT_CreateTensorWithDataAsOrtValue = 49,
	SLOT_GetTensorMutableData = 51,
	SLOT_CastTypeInfoToTensorInfo = 55,
	SLOT_GetOnnxTypeFromTypeInfo = 56,
	SLOT_GetTensorElementType = 60,
	SLOT_GetDimensionsCount = 61,
	SLOT_GetDimensions = 62,
	SLOT_GetSymbolicDimensions = 63,
	SLOT_GetTensorTypeAndShape = 65,
	SLOT_GetValueType = 67,
	SLOT_CreateCpuMemoryInfo = 69,
	SLOT_AllocatorFree = 76,
	SLOT_GetAllocatorWithDefaultOptions = 78,
	SLOT_ReleaseEnv = 92,
	SLOT_ReleaseStatus = 93,
	SLOT_ReleaseMemoryInfo = 94,
	SLOT_ReleaseSession = 95,
	SLOT_ReleaseValue = 96,
	SLOT_ReleaseTypeInfo = 98,
	SLOT_ReleaseTensorTypeAndShapeInfo = 99,
	SLOT_ReleaseSessionOptions = 100,
};

typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} dlonnx_api_base;

static void *dlonnx_lib;
static void *const *dlonnx_api;
static void *dlonnx_meminfo;

typedef void (*release_fn)(void *);
#define API(slot, type) ((type)dlonnx_api[slot])

// dlonnx_err returns the message of a failed status (malloc'd, the
// caller frees it) and releases the status; NULL for success.
static char *dlonnx_err(dlonnx_status *st) {
	if (!st) return NULL;
	const char *m = API(SLOT_GetErrorMessage, const char *(*)(const void *))(st);
	char *out = strdup(m ? m : "unknown ONNX Runtime error");
	API(SLOT_ReleaseStatus, release_fn)(st);
	return out;
}

#define MAX_OBJECTS 1024
struct dlonnx_names { int n; char *name[MAX_OBJECTS]; };

#ifndef __APPLE__
static int dlonnx_collect(struct dl_phdr_info *info, size_t size, void *data) {
	struct dlonnx_names *ns = data;
	if (info->dlpi_name && info->dlpi_name[0] && ns->n < MAX_OBJECTS) ns->name[ns->n++] = strdup(info->dlpi_name);
	return 0;
}
#endif

// dlonnx_loaded lists the paths of the loaded objects.
static void dlonnx_loaded(struct dlonnx_names *ns) {
#ifdef __APPLE__
	uint32_t n = _dyld_image_count();
	for (uint32_t i = 0; i < n && ns->n < MAX_OBJECTS; i++) {
		const char *name = _dyld_get_image_name(i);
		if (name && name[0]) ns->name[ns->n++] = strdup(name);
	}
#else
	dl_iterate_phdr(dlonnx_collect, ns);
#endif
}

// dlonnx_open finds the loaded ONNX Runtime library and takes a reference
// to it. Returns 0, 1 when none is loaded, 2 when several different ones
// are, 3 when it lacks API version 24, 4 when the memory info fails.
static int dlonnx_open(void) {
	struct dlonnx_names ns;
	ns.n = 0;
	dlonnx_loaded(&ns);
	void *found = NULL, *handle = NULL;
	int distinct = 0;
	for (int i = 0; i < ns.n; i++) {
		void *h = dlopen(ns.name[i], RTLD_LAZY | RTLD_NOLOAD);
		free(ns.name[i]);
		if (!h) continue;
		// dlsym on a handle also searches its dependencies: count
		// distinct definitions, not objects that reach one.
		void *sym = dlsym(h, "OrtGetApiBase");
		if (sym && sym != found) {
			distinct++;
			if (!found) {
				found = sym;
				Dl_info di;
				if (dladdr(sym, &di) && di.dli_fname) handle = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
			}
		}
		dlclose(h);
	}
	if (!found || !handle) {
		if (handle) dlclose(handle);
		return 1;
	}
	if (distinct > 1) {
		dlclose(handle);
		return 2;
	}
	const dlonnx_api_base *base = ((const dlonnx_api_base *(*)(void))found)();
	const void *api = base ? base->GetApi(ORT_API_VERSION_USED) : NULL;
	if (!api) {
		dlclose(handle);
		return 3;
	}
	dlonnx_api = (void *const *)api;
	void *mi = NULL;
	// OrtArenaAllocator (1), OrtMemTypeDefault (0), as onnxruntime_go.
	char *e = dlonnx_err(API(SLOT_CreateCpuMemoryInfo, dlonnx_status *(*)(int, int, void **))(1, 0, &mi));
	if (e) {
		free(e);
		dlonnx_api = NULL;
		dlclose(handle);
		return 4;
	}
	dlonnx_meminfo = mi;
	dlonnx_lib = handle;
	return 0;
}

static void dlonnx_close(void) {
	API(SLOT_ReleaseMemoryInfo, release_fn)(dlonnx_meminfo);
	dlonnx_meminfo = NULL;
	dlonnx_api = NULL;
	dlclose(dlonnx_lib);
	dlonnx_lib = NULL;
}

static void dlonnx_release_value(void *v) { API(SLOT_ReleaseValue, release_fn)(v); }
static void dlonnx_release_session(void *s) { API(SLOT_ReleaseSession, release_fn)(s); }
static void dlonnx_release_env(void *e) { API(SLOT_ReleaseEnv, release_fn)(e); }

static char *dlonnx_new_value(void *data, size_t nbytes, const int64_t *shape, size_t ndim, int type, void **out) {
	return dlonnx_err(API(SLOT_CreateTensorWithDataAsOrtValue,
		dlonnx_status *(*)(const void *, void *, size_t, const int64_t *, size_t, int, void **))(
		dlonnx_meminfo, data, nbytes, shape, ndim, type, out));
}

// dlonnx_describe reads what an OrtValue holds: 0 for a tensor (its
// element type, rank, dims up to cap, data), or the ONNXType otherwise.
static char *dlonnx_describe(void *v, int *onnx_type, int *elem, size_t *ndim, int64_t *dims, size_t cap, void **data) {
	char *e = dlonnx_err(API(SLOT_GetValueType, dlonnx_status *(*)(const void *, int *))(v, onnx_type));
	if (e || *onnx_type != 1) return e; // ONNX_TYPE_TENSOR
	void *info = NULL;
	e = dlonnx_err(API(SLOT_GetTensorTypeAndShape, dlonnx_status *(*)(const void *, void **))(v, &info));
	if (e) return e;
	e = dlonnx_err(API(SLOT_GetTensorElementType, dlonnx_status *(*)(const void *, int *))(info, elem));
	if (!e) e = dlonnx_err(API(SLOT_GetDimensionsCount, dlonnx_status *(*)(const void *, size_t *))(info, ndim));
	if (!e && *ndim <= cap) e = dlonnx_err(API(SLOT_GetDimensions, dlonnx_status *(*)(const void *, int64_t *, size_t))(info, dims, *ndim));
	API(SLOT_ReleaseTensorTypeAndShapeInfo, release_fn)(info);
	if (!e && *ndim <= cap) e = dlonnx_err(API(SLOT_GetTensorMutableData, dlonnx_status *(*)(void *, void **))(v, data));
	return e;
}

static char *dlonnx_new_session(const void *model, size_t n, int threads, void **env, void **session) {
	char *e = dlonnx_err(API(SLOT_CreateEnv, dlonnx_status *(*)(int, const char *, void **))(3, "dlonnx", env));
	if (e) return e;
	void *opts = NULL;
	e = dlonnx_err(API(SLOT_CreateSessionOptions, dlonnx_status *(*)(void **))(&opts));
	if (!e && threads > 0) e = dlonnx_err(API(SLOT_SetIntraOpNumThreads, dlonnx_status *(*)(void *, int))(opts, threads));
	if (!e) e = dlonnx_err(API(SLOT_CreateSessionFromArray, dlonnx_status *(*)(const void *, const void *, size_t, const void *, void **))(
		*env, model, n, opts, session));
	if (opts) API(SLOT_ReleaseSessionOptions, release_fn)(opts);
	if (e) {
		dlonnx_release_env(*env);
		*env = NULL;
	}
	return e;
}

static char *dlonnx_counts(void *s, size_t *in, size_t *out) {
	char *e = dlonnx_err(API(SLOT_SessionGetInputCount, dlonnx_status *(*)(const void *, size_t *))(s, in));
	if (!e) e = dlonnx_err(API(SLOT_SessionGetOutputCount, dlonnx_status *(*)(const void *, size_t *))(s, out));
	return e;
}

// dlonnx_io describes input (output == 0) or output i: its name
// (malloc'd), ONNX type, and for tensors the element type, rank, dims and
// symbolic dim names (each strdup'd, NULL when empty) up to cap.
static char *dlonnx_io(void *s, int output, size_t i, char **name, int *onnx_type, int *elem, size_t *ndim, int64_t *dims, char **syms, size_t cap) {
	void *alloc = NULL;
	char *e = dlonnx_err(API(SLOT_GetAllocatorWithDefaultOptions, dlonnx_status *(*)(void **))(&alloc));
	if (e) return e;
	char *n = NULL;
	e = dlonnx_err(API(output ? SLOT_SessionGetOutputName : SLOT_SessionGetInputName, dlonnx_status *(*)(const void *, size_t, void *, char **))(s, i, alloc, &n));
	if (e) return e;
	*name = strdup(n);
	dlonnx_err(API(SLOT_AllocatorFree, dlonnx_status *(*)(void *, void *))(alloc, n));
	void *ti = NULL;
	e = dlonnx_err(API(output ? SLOT_SessionGetOutputTypeInfo : SLOT_SessionGetInputTypeInfo, dlonnx_status *(*)(const void *, size_t, void **))(s, i, &ti));
	if (e) return e;
	e = dlonnx_err(API(SLOT_GetOnnxTypeFromTypeInfo, dlonnx_status *(*)(const void *, int *))(ti, onnx_type));
	if (!e && *onnx_type == 1) {
		const void *info = NULL;
		e = dlonnx_err(API(SLOT_CastTypeInfoToTensorInfo, dlonnx_status *(*)(const void *, const void **))(ti, &info));
		if (!e) e = dlonnx_err(API(SLOT_GetTensorElementType, dlonnx_status *(*)(const void *, int *))(info, elem));
		if (!e) e = dlonnx_err(API(SLOT_GetDimensionsCount, dlonnx_status *(*)(const void *, size_t *))(info, ndim));
		if (!e && *ndim <= cap) {
			const char *tmp[*ndim > 0 ? *ndim : 1];
			e = dlonnx_err(API(SLOT_GetDimensions, dlonnx_status *(*)(const void *, int64_t *, size_t))(info, dims, *ndim));
			if (!e) e = dlonnx_err(API(SLOT_GetSymbolicDimensions, dlonnx_status *(*)(const void *, const char **, size_t))(info, tmp, *ndim));
			for (size_t d = 0; !e && d < *ndim; d++) syms[d] = tmp[d] && tmp[d][0] ? strdup(tmp[d]) : NULL;
		}
	}
	API(SLOT_ReleaseTypeInfo, release_fn)(ti);
	return e;
}

static char *dlonnx_run(void *s, const char *const *in_names, void *const *in, size_t nin, const char *const *out_names, void **out, size_t nout) {
	return dlonnx_err(API(SLOT_Run, dlonnx_status *(*)(void *, const void *, const char *const *, void *const *, size_t, const char *const *, size_t, void **))(
		s, NULL, in_names, in, nin, out_names, nout, out));
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// lib counts the references to the library: one per live ORT value,
// session and environment this package made. The first opens it, the
// last closes it.
var lib struct {
	mu   sync.Mutex
	refs int
}

// acquire takes a reference to the loaded ONNX Runtime library.
func acquire() error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.refs == 0 {
		switch C.dlonnx_open() {
		case 0:
		case 1:
			return fmt.Errorf("%w: no loaded library exports OrtGetApiBase (call ort.InitializeEnvironment first)", ErrNotLoaded)
		case 2:
			return fmt.Errorf("%w: several different ONNX Runtime libraries are loaded", ErrNotLoaded)
		case 3:
			return fmt.Errorf("%w: the library lacks C API version 24 (ONNX Runtime 1.24 or later)", ErrNotLoaded)
		default:
			return fmt.Errorf("%w: CreateCpuMemoryInfo failed", ErrRuntime)
		}
	}
	lib.refs++
	return nil
}

// addRef takes one more reference while the caller holds one.
func addRef() {
	lib.mu.Lock()
	lib.refs++
	lib.mu.Unlock()
}

// releaseLib drops a reference; the last closes our handle (the library
// is unloaded if onnxruntime_go closed its own).
func releaseLib() {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.refs--
	if lib.refs == 0 {
		C.dlonnx_close()
	}
}

// libRefs reports the references held, for tests.
func libRefs() int {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.refs
}

// ortErr converts a message from C (freed here) into an error.
func ortErr(what string, msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return fmt.Errorf("%w: %s: %s", ErrRuntime, what, C.GoString(msg))
}

// newRawValue makes an OrtValue over data (nbytes) with the given shape
// and element type; the caller holds a library reference.
func newRawValue(data unsafe.Pointer, nbytes uintptr, shape []int64, elem int) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	var sp *C.int64_t
	if len(shape) > 0 {
		sp = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	err := ortErr("CreateTensorWithDataAsOrtValue", C.dlonnx_new_value(data, C.size_t(nbytes), sp, C.size_t(len(shape)), C.int(elem), &out))
	return out, err
}

func releaseRawValue(v unsafe.Pointer) { C.dlonnx_release_value(v) }

var dimsPool = sync.Pool{New: func() any { return new([maxRank]int64) }}

// describeValue reads an OrtValue: its ONNXType (1 for a tensor) and, for
// a tensor, its element type, rank, shape (when rank <= maxRank) and data.
func describeValue(v unsafe.Pointer) (onnxType, elem, ndim int, shape []int64, data unsafe.Pointer, err error) {
	var ot, et C.int
	var nd C.size_t
	dims := dimsPool.Get().(*[maxRank]int64) // what C writes escapes: reuse it
	defer dimsPool.Put(dims)
	err = ortErr("reading the value", C.dlonnx_describe(v, &ot, &et, &nd, (*C.int64_t)(unsafe.Pointer(&dims[0])), maxRank, &data))
	onnxType, elem, ndim = int(ot), int(et), int(nd)
	if err == nil && ndim <= maxRank {
		shape = append(make([]int64, 0, ndim), dims[:ndim]...)
	}
	return
}

// newSession opens a session over model with its own reference to the
// environment (ONNX Runtime's environment is one per process, counted:
// this one keeps it alive whatever onnxruntime_go does with its own).
func newSession(model []byte, threads int) (env, session unsafe.Pointer, err error) {
	if len(model) == 0 {
		return nil, nil, fmt.Errorf("dlonnx: empty model: %w", dlpack.ErrShape)
	}
	p := C.CBytes(model)
	defer C.free(p)
	err = ortErr("CreateSessionFromArray", C.dlonnx_new_session(p, C.size_t(len(model)), C.int(threads), &env, &session))
	return
}

func releaseSession(env, session unsafe.Pointer) {
	C.dlonnx_release_session(session)
	C.dlonnx_release_env(env)
}

// ioInfo describes input or output i of a session.
func ioInfo(session unsafe.Pointer, output bool, i int) (Info, int, error) {
	var name *C.char
	var ot, et C.int
	var nd C.size_t
	var dims [maxRank]int64
	var syms [maxRank]*C.char
	out := C.int(0)
	if output {
		out = 1
	}
	err := ortErr("reading the session's inputs and outputs", C.dlonnx_io(session, out, C.size_t(i), &name, &ot, &et, &nd,
		(*C.int64_t)(unsafe.Pointer(&dims[0])), &syms[0], maxRank))
	var info Info
	if name != nil {
		info.Name = C.GoString(name)
		C.free(unsafe.Pointer(name))
	}
	n := min(int(nd), maxRank)
	if err == nil && ot == 1 {
		info.Shape = append([]int64(nil), dims[:n]...)
		info.Dims = make([]string, n)
		for d := 0; d < n; d++ {
			if syms[d] != nil {
				info.Dims[d] = C.GoString(syms[d])
				C.free(unsafe.Pointer(syms[d]))
			}
		}
		if int(nd) > maxRank {
			err = &dlpack.FieldError{Field: info.Name + " rank", Value: int(nd), Err: dlpack.ErrNDim, Why: fmt.Sprintf("more than %d dimensions", maxRank)}
		}
	}
	info.elem = int(et)
	return info, int(ot), err
}

func sessionCounts(session unsafe.Pointer) (in, out int, err error) {
	var ni, no C.size_t
	err = ortErr("counting the session's inputs and outputs", C.dlonnx_counts(session, &ni, &no))
	return int(ni), int(no), err
}

// cNames are names in C memory for Run.
type cNames []*C.char

func newCNames(names []string) cNames {
	c := make(cNames, len(names))
	for i, n := range names {
		c[i] = C.CString(n)
	}
	return c
}

func (c cNames) free() {
	for _, p := range c {
		C.free(unsafe.Pointer(p))
	}
}

// run calls Run; ins and outs are arrays of OrtValue* in C memory.
func run(session unsafe.Pointer, inNames cNames, ins unsafe.Pointer, nin int, outNames cNames, outs unsafe.Pointer, nout int) error {
	var ip, op **C.char
	if nin > 0 {
		ip = &inNames[0]
	}
	if nout > 0 {
		op = &outNames[0]
	}
	return ortErr("Run", C.dlonnx_run(session, ip, (*unsafe.Pointer)(ins), C.size_t(nin), op, (*unsafe.Pointer)(outs), C.size_t(nout)))
}

// cArray is an array of nout pointers in C memory (the OrtValue* Run
// reads and writes: C memory, so the values it holds never are Go
// pointers in Go memory).
func cArray(n int) unsafe.Pointer {
	return C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(uintptr(0))))
}

func freeC(p unsafe.Pointer) { C.free(p) }
