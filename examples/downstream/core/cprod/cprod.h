// A downstream C library: a producer and a consumer of DLPack tensors.
#include <stdint.h>
#include "dlpack.h"

// cprod_arange returns a rows x cols float64 tensor holding 0, 1, 2, ... in
// row-major order, laid out column-major (strides 1, rows) in C memory.
// Its deleter frees it. NULL when out of memory.
DLManagedTensorVersioned* cprod_arange(int64_t rows, int64_t cols);

// cprod_sum takes ownership of a float32 or float64 CPU tensor of any
// strides, returns the sum of its elements and calls its deleter. A tensor
// it cannot read (NaN returned) is still released.
double cprod_sum(DLManagedTensorVersioned* m);

// Tensors made by cprod_arange not yet freed.
int64_t cprod_live(void);
