"""pyarrow's own DLPack producer, for bench/compare.sh:
np.from_dlpack(a) on a pyarrow float32 array of 1024 values asks it for a
versioned capsule, imports it as a NumPy array and drops it (calling the
deleter, which releases pyarrow's buffer reference). Prints the median
ns/op of 7 runs."""
import statistics
import timeit

import numpy as np
import pyarrow as pa

a = pa.array(np.zeros(1024, dtype=np.float32))
y = np.from_dlpack(a)
assert y.ctypes.data == a.buffers()[1].address, "zero copy"
cap = a.__dlpack__(max_version=(1, 0))
assert "dltensor_versioned" in repr(cap), repr(cap)
del y, cap

n = 500_000
runs = timeit.repeat("np.from_dlpack(a)", globals={"np": np, "a": a}, number=n, repeat=7)
print(f"{statistics.median(runs) / n * 1e9:.1f}")
