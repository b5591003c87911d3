// The project's own header first: it declares the ABI, and the library's
// dlpack.h, included next, adds nothing.
#include "theirs_dlpack.h"
#include "dlpack.h"
#include "mixed.h"

int mixed_minor_theirs_first(void) { return DLPACK_MINOR_VERSION; }

int64_t mixed_numel_theirs_first(DLManagedTensorVersioned* m) {
	int64_t n = 1;
	for (int32_t d = 0; d < m->dl_tensor.ndim; d++) {
		n *= m->dl_tensor.shape[d];
	}
	return n;
}
