// C side of the cgo bridge: deleters, allocation and the deleter trampoline.
// Declarations are in the preamble of cgo_bridge.go.
#include <stdlib.h>
#include <string.h>
#include "_cgo_export.h"

int64_t godlpack_buffer_exports = 0;
int64_t godlpack_bad_releases = 0;
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

// Releases a Go-memory export: one call into Go with the handle we wrote,
// then frees the block.
static void release_go(void* self) {
	godlpack_prefix* p = claim(self, GODLPACK_MAGIC_GO);
	if (p != NULL) {
		godlpackGoRelease(p->handle);
		free(p);
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
		free(ctl);
	}
	__atomic_sub_fetch(&godlpack_buffer_exports, 1, __ATOMIC_RELAXED);
	free(p);
}

void godlpack_buffer_release_versioned(DLManagedTensorVersioned* self) { release_buffer(self); }
void godlpack_buffer_release_legacy(DLManagedTensor* self) { release_buffer(self); }

void godlpack_call_deleter(uintptr_t fn, uintptr_t self) {
	if (fn != 0) {
		((void (*)(void*))fn)((void*)self);
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
	memset(p, 0, total);
	godlpack_bufctl* ctl = (godlpack_bufctl*)p;
	ctl->refs = 1;
	ctl->nbytes = nbytes;
	return p;
}
