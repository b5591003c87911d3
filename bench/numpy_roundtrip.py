"""NumPy's own DLPack round trip, for bench/compare.sh: np.from_dlpack(x)
on a 32x32 float32 array asks x for a versioned capsule (max_version),
imports it as a new array, and drops it (calling the deleter). Prints the
median ns/op of 7 runs."""
import statistics
import timeit

import numpy as np

x = np.ones((32, 32), dtype=np.float32)
y = np.from_dlpack(x)
assert np.shares_memory(x, y), "zero copy"
cap = x.__dlpack__(max_version=(1, 0))
assert "dltensor_versioned" in repr(cap), repr(cap)
del y, cap

n = 500_000
runs = timeit.repeat("np.from_dlpack(x)", globals={"np": np, "x": x}, number=n, repeat=7)
print(f"{statistics.median(runs) / n * 1e9:.1f}")
