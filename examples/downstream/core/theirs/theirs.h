// A C library that came with its own dlpack.h.
#include <stdint.h>
#include "theirs_dlpack.h"

// theirs_fill returns a read-only 1-D float32 tensor of n copies of x,
// whose first element sits byte_offset bytes past data. Its deleter frees
// it. NULL when out of memory.
DLManagedTensorVersioned* theirs_fill(int64_t n, float x);

// theirs_negate takes ownership of a 1-D float32 CPU tensor, returns a new
// writable tensor (its own memory, flagged IS_COPIED) holding the negated
// elements, and releases the input. NULL (input still released) when the
// tensor is not one it can read.
DLManagedTensorVersioned* theirs_negate(DLManagedTensorVersioned* in);

// Tensors made by this library not yet freed.
int64_t theirs_live(void);
