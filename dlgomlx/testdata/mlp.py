"""Weights written by safetensors, a GoMLX MLP run on them in Go (simplego),
the result taken by NumPy through DLPack and compared with JAX computing the
same function on the same weights; then N exchanges each way (run by
TestNumPyAndJAXSideBySide).

  mlp.py LIB DIR N   LIB: libpybridges.so (./internal/libpybridges, the
                     bridges' C shared library); DIR: a scratch directory
"""
import ctypes
import gc
import os
import resource
import sys

import numpy as np
import safetensors.numpy

import jax
import jax.numpy as jnp

lib = ctypes.PyDLL(sys.argv[1])
lib.pybridges_init.restype = ctypes.c_int
lib.dlgomlx_init.restype = ctypes.c_int
lib.dlgomlx_mlp.restype = ctypes.c_int64
lib.dlgomlx_mlp.argtypes = [ctypes.c_char_p]
lib.dlgomlx_dlpack.restype = ctypes.py_object
lib.dlgomlx_dlpack.argtypes = [ctypes.c_int] + [ctypes.py_object] * 4
lib.dlgomlx_addr.restype = ctypes.c_size_t
lib.dlgomlx_addr.argtypes = [ctypes.c_int]
lib.dlgomlx_exports.restype = ctypes.c_int64
lib.dlgomlx_exports.argtypes = [ctypes.c_int]
lib.dlgomlx_put.restype = ctypes.c_int
lib.dlgomlx_put.argtypes = [ctypes.py_object]
lib.dlgomlx_take.restype = ctypes.c_int
lib.dlgomlx_take.argtypes = [ctypes.py_object]
lib.dlgomlx_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
lib.pybridges_outstanding.restype = ctypes.c_int64
assert lib.pybridges_init() == 0 and lib.dlgomlx_init() == 0
d, rounds = sys.argv[2], int(sys.argv[3])


def stats():
    v = [ctypes.c_int64() for _ in range(3)]
    lib.dlgomlx_stats(*[ctypes.byref(x) for x in v])
    return tuple(x.value for x in v)


class GoResult:
    """Result i of the GoMLX model, as a DLPack producer."""

    def __init__(self, i):
        self.i = i

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return lib.dlgomlx_dlpack(self.i, stream, max_version, dl_device, copy)


# The weights, written by the safetensors package.
rng = np.random.default_rng(7)
w = {
    "x": rng.standard_normal((5, 8), dtype=np.float32),
    "w1": rng.standard_normal((8, 16), dtype=np.float32),
    "b1": rng.standard_normal(16, dtype=np.float32),
    "w2": rng.standard_normal((16, 4), dtype=np.float32),
    "b2": rng.standard_normal(4, dtype=np.float32),
    "xi": rng.integers(-1000, 1000, (3, 4), dtype=np.int32),
}
path = os.path.join(d, "mlp.safetensors")
safetensors.numpy.save_file(w, path)

# Go: tensorfile maps the file, the bridge copies each tensor once into a
# simplego buffer, GoMLX runs the model.
copies = lib.dlgomlx_mlp(path.encode())
assert copies == len(w), f"the bridge made {copies} copies for {len(w)} tensors"
print(f"weights: {len(w)} tensors from safetensors into GoMLX, {copies} copies (one each)")

# JAX computes the same function on the same weights.
j = {k: jnp.asarray(v) for k, v in safetensors.numpy.load_file(path).items()}
want_probs = np.asarray(jax.nn.softmax(jax.nn.relu(j["x"] @ j["w1"] + j["b1"]) @ j["w2"] + j["b2"], axis=-1))
want_ints = np.asarray(j["xi"] * 3 + 7)
want_w1t = np.asarray(j["w1"].T)

# NumPy takes the GoMLX results through DLPack, sharing their memory.
s0 = stats()
probs, ints, w1t = (np.from_dlpack(GoResult(i)) for i in range(3))
s1 = stats()
assert s1[0] - s0[0] == 3 and s1[1] == s0[1], (s0, s1)
for i, a in enumerate((probs, ints, w1t)):
    assert a.ctypes.data == lib.dlgomlx_addr(i), "NumPy did not share the GoMLX result"
    assert not a.flags.writeable
    assert lib.dlgomlx_exports(i) == 1
assert probs.dtype == np.float32 and probs.shape == (5, 4)
np.testing.assert_allclose(probs, want_probs, rtol=1e-5, atol=1e-6)
maxdiff = float(np.max(np.abs(probs - want_probs)))
assert ints.dtype == np.int32 and ints.tobytes() == want_ints.tobytes(), "integer ops differ"
assert w1t.shape == (16, 8) and w1t.tobytes() == want_w1t.tobytes(), "transpose differs"
assert np.array_equal(w1t, w["w1"].T)
print(f"results to NumPy: 3 shared, 0 copies; softmax MLP equal to JAX within {maxdiff:.2e}; "
      "int32 ops and the transpose bit for bit")
del probs, ints, w1t, a
gc.collect()
assert all(lib.dlgomlx_exports(i) == 0 for i in range(3)) and lib.pybridges_outstanding() == 0

# NumPy arrays of every dtype both sides have (strided ones too) into
# GoMLX and back to NumPy, bit for bit; bfloat16 through JAX both ways.
cases = []
for dt in [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, np.float32, np.float64, np.complex64, np.complex128]:
    a = (rng.standard_normal((4, 6)) * 100).astype(dt)
    if np.dtype(dt).kind == "c":
        a = a + 1j * (rng.standard_normal((4, 6)) * 100).astype(dt)
    cases += [(np.dtype(dt).name, a), (np.dtype(dt).name + ".T", a.T), (np.dtype(dt).name + "[::2, ::-1]", a[::2, ::-1]),
              (np.dtype(dt).name + " 0-d", np.array(a[1, 2], dtype=dt)), (np.dtype(dt).name + " empty", a[:0])]
s0 = stats()
for name, a in cases:
    i = lib.dlgomlx_put(a)
    b = np.from_dlpack(GoResult(i))
    assert b.dtype == a.dtype and b.shape == a.shape, (name, b.dtype, b.shape)
    assert b.tobytes() == np.ascontiguousarray(a).tobytes(), name
    del b
s1 = stats()
nonempty = sum(1 for _, a in cases if a.size)
assert s1[1] - s0[1] == nonempty and s1[0] - s0[0] == len(cases), (s0, s1)  # one copy in, none out
xb = jnp.asarray(rng.standard_normal((3, 5)), dtype=jnp.bfloat16)
i = lib.dlgomlx_put(xb)
yb = jnp.from_dlpack(GoResult(i))
assert yb.dtype == jnp.bfloat16 and np.asarray(yb).tobytes() == np.asarray(xb).tobytes()
yb = jnp.from_dlpack(GoResult(2))  # the transposed w1: JAX reads GoMLX's result too
assert np.asarray(yb).tobytes() == want_w1t.tobytes()
del yb
gc.collect()
print(f"{len(cases)} NumPy arrays (14 dtypes; transposed, reversed, 0-d, empty) into GoMLX and back bit for bit; "
      "bfloat16 from JAX and back, and a GoMLX result into JAX")

# Exchanges each way: GoMLX -> NumPy (the Go deleter, counted by Go) and
# NumPy -> GoMLX (NumPy's deleter drops its reference to the array).
x = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
ref0 = sys.getrefcount(x)
for _ in range(min(rounds, 1000)):  # warm-up
    a = np.from_dlpack(GoResult(0))
    del a
    assert lib.dlgomlx_take(x) == 0
gc.collect()
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s0 = stats()
for _ in range(rounds):
    a = np.from_dlpack(GoResult(0))
    del a
    assert lib.dlgomlx_take(x) == 0
gc.collect()
s1 = stats()
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert lib.pybridges_outstanding() == 0 and lib.dlgomlx_exports(0) == 0, "GoMLX exports outstanding"
assert sys.getrefcount(x) == ref0, "NumPy's deleter did not run exactly once per exchange"
assert s1[0] - s0[0] == rounds and s1[1] - s0[1] == rounds, (s0, s1)
assert rss1 - rss0 < 32 * 1024, f"peak RSS grew by {rss1 - rss0} KiB"
print(f"{rounds} exchanges each way with NumPy: outstanding 0, NumPy's references back to {ref0}, "
      f"peak RSS +{rss1 - rss0} KiB")
lib.dlgomlx_free()
print("done")
