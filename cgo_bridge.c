// C side of the cgo bridge: deleters, allocation and the deleter trampoline.
// Declarations are in the preamble of cgo_bridge.go.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "_cgo_export.h"

int64_t godlpack_buffer_exports = 0;
int64_t godlpack_bad_releases = 0;
// Every C block this package allocates (managed-struct blocks and buffers)
// counts here from its malloc to its free: a count-based leak check.
int64_t godlpack_live_blocks = 0;
// Export records' own blocks, from allocation to free (in use or idle;
// ReadStats tells the two apart).
int64_t godlpack_kept_blocks = 0;

static void counted_free(void* p) {
	__atomic_sub_fetch(&godlpack_live_blocks, 1, __ATOMIC_RELAXED);
	free(p);
}
unsigned char godlpack_empty[GODLPACK_ALIGN] __attribute__((aligned(GODLPACK_ALIGN)));

// claim returns the hidden prefix of a live block of the given kind and
// marks it dead, so that a second deleter call (or a struct we did not
// make) is counted and refused instead of freeing twice. NULL when refused.
static godlpack_prefix* claim(void* self, uint64_t magic) {
	if (self == NULL) {
		return NULL;
	}
	godlpack_prefix* p = (godlpack_prefix*)((char*)self - sizeof(godlpack_prefix));
	if (p->magic != magic) {
		__atomic_add_fetch(&godlpack_bad_releases, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	p->magic = GODLPACK_MAGIC_DEAD;
	return p;
}

// Releases a Go-memory export: one call into Go with the handle we wrote.
// The block is usually its record's own, which Go keeps for the record's
// next export (the block must not be touched once Go has returned); Go
// asks for a free only for one-off blocks.
static void release_go(void* self) {
	godlpack_prefix* p = claim(self, GODLPACK_MAGIC_GO);
	if (p != NULL && godlpackGoRelease(p->handle, p->gen, p)) {
		counted_free(p);
	}
}

void godlpack_release_versioned(DLManagedTensorVersioned* self) { release_go(self); }
void godlpack_release_legacy(DLManagedTensor* self) { release_go(self); }

// Releases a Buffer export in pure C: drops one reference to the buffer and
// frees it with the last one.
static void release_buffer(void* self) {
	godlpack_prefix* p = claim(self, GODLPACK_MAGIC_BUF);
	if (p == NULL) {
		return;
	}
	godlpack_bufctl* ctl = (godlpack_bufctl*)(uintptr_t)p->handle;
	if (__atomic_sub_fetch(&ctl->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		counted_free(ctl);
	}
	__atomic_sub_fetch(&godlpack_buffer_exports, 1, __ATOMIC_RELAXED);
	counted_free(p);
}

void godlpack_buffer_release_versioned(DLManagedTensorVersioned* self) { release_buffer(self); }
void godlpack_buffer_release_legacy(DLManagedTensor* self) { release_buffer(self); }

void godlpack_call_deleter(uintptr_t fn, uintptr_t self) {
	if (fn != 0) {
		((void (*)(void*))fn)((void*)self);
	}
}

void godlpack_call_deleters(const uintptr_t* fns, const uintptr_t* selfs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (fns[i] != 0) {
			((void (*)(void*))fns[i])((void*)selfs[i]);
		}
	}
}

void* godlpack_buffer_alloc(uint64_t nbytes) {
	if (nbytes > SIZE_MAX - GODLPACK_BUFFER_DATA - GODLPACK_ALIGN) {
		return NULL;
	}
	size_t total = GODLPACK_BUFFER_DATA + (size_t)nbytes;
	total = (total + GODLPACK_ALIGN - 1) / GODLPACK_ALIGN * GODLPACK_ALIGN;
	void* p = aligned_alloc(GODLPACK_ALIGN, total);
	if (p == NULL) {
		return NULL;
	}
	__atomic_add_fetch(&godlpack_live_blocks, 1, __ATOMIC_RELAXED);
	memset(p, 0, total);
	godlpack_bufctl* ctl = (godlpack_bufctl*)p;
	ctl->refs = 1;
	ctl->nbytes = nbytes;
	return p;
}

void godlpack_buffer_free(void* ctl) { counted_free(ctl); }

void* godlpack_kept_alloc(size_t n) {
	void* p = malloc(n);
	if (p != NULL) {
		__atomic_add_fetch(&godlpack_kept_blocks, 1, __ATOMIC_RELAXED);
	}
	return p;
}

void godlpack_kept_free(void* p) {
	__atomic_sub_fetch(&godlpack_kept_blocks, 1, __ATOMIC_RELAXED);
	free(p);
}

void* godlpack_block_alloc(size_t n) {
	void* p = malloc(n);
	if (p != NULL) {
		__atomic_add_fetch(&godlpack_live_blocks, 1, __ATOMIC_RELAXED);
	}
	return p;
}

// ---- The DLPack 1.3 exchange API table this package publishes ----------

static int alloc_fail(void* error_ctx, void (*SetError)(void*, const char*, const char*),
                      const char* kind, const char* message) {
	if (SetError != NULL) {
		SetError(error_ctx, kind, message);
	}
	return -1;
}

// Allocates a compact row-major CPU tensor like the prototype (dtype,
// shape, device), zeroed and 256-byte aligned, owned by the returned
// managed tensor alone. Pure C: safe from any thread, no call into Go.
static int exchange_allocator(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                              void (*SetError)(void*, const char*, const char*)) {
	if (proto == NULL || out == NULL) {
		return alloc_fail(error_ctx, SetError, "ValueError", "prototype and out must not be NULL");
	}
	*out = NULL;
	if (proto->device.device_type != kDLCPU) {
		return alloc_fail(error_ctx, SetError, "BufferError", "this allocator makes CPU tensors only");
	}
	if (proto->ndim < 0 || proto->ndim > 64 || (proto->ndim > 0 && proto->shape == NULL)) {
		return alloc_fail(error_ctx, SetError, "ValueError", "ndim must be 0..64 with a shape");
	}
	uint64_t elem_bits = (uint64_t)proto->dtype.bits * proto->dtype.lanes;
	if (elem_bits == 0 || elem_bits % 8 != 0 || proto->dtype.code > kDLFloat4_e2m1fn) {
		return alloc_fail(error_ctx, SetError, "BufferError", "unsupported data type (need a known code and whole bytes)");
	}
	uint64_t nbytes = elem_bits / 8;
	for (int i = 0; i < proto->ndim; i++) {
		int64_t d = proto->shape[i];
		if (d < 0) {
			return alloc_fail(error_ctx, SetError, "ValueError", "negative dimension");
		}
		if (d != 0 && nbytes > (UINT64_MAX >> 1) / (uint64_t)d) {
			return alloc_fail(error_ctx, SetError, "MemoryError", "tensor size overflows");
		}
		nbytes *= (uint64_t)d;
	}
	godlpack_bufctl* ctl = godlpack_buffer_alloc(nbytes);
	if (ctl == NULL) {
		return alloc_fail(error_ctx, SetError, "MemoryError", "out of memory");
	}
	size_t hdr = sizeof(godlpack_prefix) + sizeof(DLManagedTensorVersioned) + 2 * sizeof(int64_t) * (size_t)proto->ndim;
	godlpack_prefix* p = godlpack_block_alloc(hdr);
	if (p == NULL) {
		godlpack_buffer_free(ctl);
		return alloc_fail(error_ctx, SetError, "MemoryError", "out of memory");
	}
	p->handle = (uint64_t)(uintptr_t)ctl;
	p->gen = 0;
	p->magic = GODLPACK_MAGIC_BUF;
	DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)(p + 1);
	int64_t* shape = (int64_t*)(m + 1);
	int64_t* strides = shape + proto->ndim;
	int64_t acc = 1;
	for (int i = proto->ndim - 1; i >= 0; i--) {
		shape[i] = proto->shape[i];
		strides[i] = acc;
		acc *= shape[i] > 0 ? shape[i] : 1;
	}
	memset(m, 0, sizeof *m);
	m->version.major = DLPACK_MAJOR_VERSION;
	m->version.minor = DLPACK_MINOR_VERSION;
	m->manager_ctx = ctl;
	m->deleter = godlpack_buffer_release_versioned;
	m->dl_tensor.data = (char*)ctl + GODLPACK_BUFFER_DATA;
	m->dl_tensor.device.device_type = kDLCPU;
	m->dl_tensor.ndim = proto->ndim;
	m->dl_tensor.dtype = proto->dtype;
	m->dl_tensor.shape = proto->ndim > 0 ? shape : NULL;
	m->dl_tensor.strides = proto->ndim > 0 ? strides : NULL;
	__atomic_add_fetch(&godlpack_buffer_exports, 1, __ATOMIC_RELAXED);
	*out = m;
	return 0;
}

// The CPU has no streams: NULL. Other devices are not this library's.
static int exchange_current_work_stream(DLDeviceType device_type, int32_t device_id, void** out_stream) {
	(void)device_id;
	if (out_stream != NULL) {
		*out_stream = NULL;
	}
	return device_type == kDLCPU ? 0 : -1;
}

// Process lifetime; the Python-object entries are NULL: this table serves
// C and Go callers, not a Python framework.
DLPackExchangeAPI godlpack_exchange_api = {
	{{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
	exchange_allocator,
	NULL,
	NULL,
	NULL,
	exchange_current_work_stream,
};

// ---- Calling another library's table --------------------------------------

typedef struct {
	char* buf;
	size_t cap;
	int called;
} error_sink;

static void sink_error(void* ctx, const char* kind, const char* message) {
	error_sink* s = (error_sink*)ctx;
	s->called = 1;
	snprintf(s->buf, s->cap, "%s: %s", kind ? kind : "Error", message ? message : "");
}

int godlpack_call_allocator(uintptr_t fn, uint8_t code, uint8_t bits, uint16_t lanes, int32_t dev_type,
                            int32_t dev_id, int32_t ndim, int64_t* shape, uintptr_t* out, char* err, size_t errcap) {
	DLTensor proto;
	memset(&proto, 0, sizeof proto);
	proto.device.device_type = (DLDeviceType)dev_type;
	proto.device.device_id = dev_id;
	proto.ndim = ndim;
	proto.dtype.code = code;
	proto.dtype.bits = bits;
	proto.dtype.lanes = lanes;
	proto.shape = shape;
	error_sink sink = {err, errcap, 0};
	DLManagedTensorVersioned* m = NULL;
	int rc = ((DLPackManagedTensorAllocator)fn)(&proto, &m, &sink, sink_error);
	*out = (uintptr_t)m;
	if (rc != 0 && !sink.called) {
		snprintf(err, errcap, "allocator failed with %d and no message", rc);
	}
	return rc;
}

int godlpack_call_stream(uintptr_t fn, int32_t dev_type, int32_t dev_id, uintptr_t* out) {
	void* s = NULL;
	int rc = ((DLPackCurrentWorkStream)fn)((DLDeviceType)dev_type, dev_id, &s);
	*out = (uintptr_t)s;
	return rc;
}
