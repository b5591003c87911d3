// C side of the cgo bridge: deleters, allocation and the deleter trampoline.
// Declarations are in the preamble of cgo_bridge.go.
#include <stdlib.h>
#include <string.h>
#include "_cgo_export.h"

int64_t godlpack_buffer_exports = 0;
int64_t godlpack_bad_releases = 0;
// Every C block this package allocates (managed-struct blocks and buffers)
// counts here from its malloc to its free: a count-based leak check.
int64_t godlpack_live_blocks = 0;

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

// Releases a Go-memory export: one call into Go with the handle we wrote,
// then frees the block.
static void release_go(void* self) {
	godlpack_prefix* p = claim(self, GODLPACK_MAGIC_GO);
	if (p != NULL) {
		godlpackGoRelease(p->handle);
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

void* godlpack_block_alloc(size_t n) {
	void* p = malloc(n);
	if (p != NULL) {
		__atomic_add_fetch(&godlpack_live_blocks, 1, __ATOMIC_RELAXED);
	}
	return p;
}
