// Package mixed has C files that include both the library's dlpack.h (a
// copy written by go generate) and the project's own (theirs_dlpack.h,
// guarded like upstream's), in each order. Whichever comes first declares
// the ABI; the other adds nothing.
package mixed

//go:generate go tool dlpack-header -o .

/*
#cgo CFLAGS: -I${SRCDIR}/../theirs
#include "dlpack.h"
#include "mixed.h"
*/
import "C"

import "unsafe"

// Minors returns DLPACK_MINOR_VERSION as seen by the file that includes
// the project's header first, and by the one that includes ours first.
func Minors() (theirsFirst, oursFirst int) {
	return int(C.mixed_minor_theirs_first()), int(C.mixed_minor_ours_first())
}

// Numels returns the element count of the tensor at p as each file
// computes it; p stays owned by the caller.
func Numels(p unsafe.Pointer) (theirsFirst, oursFirst int64) {
	m := (*C.DLManagedTensorVersioned)(p)
	return int64(C.mixed_numel_theirs_first(m)), int64(C.mixed_numel_ours_first(m))
}
