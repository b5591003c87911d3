// The library's dlpack.h first: it declares the ABI (and its 1.3 extras),
// and the project's own header, included next, adds nothing.
#include "dlpack.h"
#include "theirs_dlpack.h"
#include "mixed.h"

int mixed_minor_ours_first(void) { return DLPACK_MINOR_VERSION + 0 * kDLFloat8_e4m3fn; }

int64_t mixed_numel_ours_first(DLManagedTensorVersioned* m) {
	int64_t n = 1;
	for (int32_t d = 0; d < m->dl_tensor.ndim; d++) {
		n *= m->dl_tensor.shape[d];
	}
	return n;
}
