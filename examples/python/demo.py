"""Go and NumPy exchange tensors through DLPack, with no copy: run with
`make python-example` (builds libgodlpack.so from Go and a virtualenv)."""
import gc
import sys

import numpy as np

import godlpack

t = godlpack.GoTensor(2, 3)
a = np.from_dlpack(t)
print("NumPy sees Go's matrix:", a.tolist(), "same memory:", a.ctypes.data == t.data_address)
a *= 10
print("after a *= 10 in NumPy, Go's memory holds:", np.from_dlpack(t).tolist())

x = np.arange(12.0).reshape(3, 4)
total, versioned, read_only, compact = godlpack.consume_sum(x[::-1, ::2])
print(f"Go summed a strided NumPy view: {total} (versioned {versioned}, compact {compact})")

refs = sys.getrefcount(x)
g = godlpack.GoTensor.from_dlpack(x)  # NumPy -> Go: Go owns the imported tensor
b = np.from_dlpack(g)  # ... and hands it on: the same memory
print("NumPy -> Go -> NumPy, same memory:", b.ctypes.data == x.ctypes.data)
g.close()
del b
print("NumPy's deleter ran once everyone let go:", sys.getrefcount(x) == refs)

del a
gc.collect()
print(f"done: outstanding exports {godlpack.outstanding()}")
