// A tiny C library that speaks DLPack: it takes ownership of a float64
// tensor of any layout, returns a new compact tensor holding factor times
// its values, and releases the input. Returns NULL (input released) for
// anything it cannot handle.
#ifndef SCALE_H_
#define SCALE_H_
#include "dlpack/dlpack.h"

DLManagedTensorVersioned* scale_tensor(DLManagedTensorVersioned* in, double factor);

// Outstanding tensors this library made and nobody released yet.
int scale_outstanding(void);
#endif
