"""Go maps a file, NumPy takes its tensors through DLPack: the arrays must
share the Go mapping (run by TestNumPySharesTheMapping).

  share.py LIB DIR   LIB: libpybridges.so (./internal/libpybridges); DIR: a scratch directory
"""
import ctypes
import gc
import os
import sys

import numpy as np
import safetensors.numpy

lib = ctypes.PyDLL(sys.argv[1])
lib.pybridges_init.restype = ctypes.c_int
lib.tensorfile_open.restype = ctypes.c_int64
lib.tensorfile_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
lib.tensorfile_range.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int64)]
lib.tensorfile_dlpack.restype = ctypes.py_object
lib.tensorfile_dlpack.argtypes = [ctypes.c_int64, ctypes.c_int] + [ctypes.py_object] * 4
lib.pybridges_free.argtypes = [ctypes.c_int64]
lib.tensorfile_live.restype = ctypes.c_int64
assert lib.pybridges_init() == 0
d = sys.argv[2]
NPY, NPZ, ST = 0, 1, 2


class GoFile:
    def __init__(self, path, kind, rw=False):
        self.id = lib.tensorfile_open(path.encode(), kind, int(rw))

    def range(self):
        a, n = ctypes.c_size_t(), ctypes.c_int64()
        lib.tensorfile_range(self.id, ctypes.byref(a), ctypes.byref(n))
        return a.value, n.value

    def tensor(self, i):
        return GoTensor(self, i)

    def close(self):
        lib.pybridges_free(self.id)


class GoTensor:
    def __init__(self, f, i):
        self.f, self.i = f, i

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return lib.tensorfile_dlpack(self.f.id, self.i, stream, max_version, dl_device, copy)


def inside(a, rng):
    addr, n = rng
    return addr <= a.ctypes.data and a.ctypes.data + a.nbytes <= addr + n


live0 = lib.tensorfile_live()
checks = 0

# A read-only .npy (C and Fortran order): shared, read-only, same bits.
for order in "CF":
    x = np.asarray(np.arange(24.0).reshape(2, 3, 4), order=order)
    p = os.path.join(d, f"ro_{order}.npy")
    np.save(p, x)
    f = GoFile(p, NPY)
    rng = f.range()
    a = np.from_dlpack(f.tensor(0))
    assert inside(a, rng), (order, hex(a.ctypes.data), rng)
    assert not a.flags.writeable
    assert a.strides == x.strides, (a.strides, x.strides)
    assert np.array_equal(a, x)
    # copy=True: NumPy gets its own memory, outside the mapping
    c = np.from_dlpack(f.tensor(0), copy=True)
    assert not inside(c, rng) and np.array_equal(c, x)
    f.close()
    assert lib.tensorfile_live() == live0 + 1, "unmapped while NumPy holds an array"
    assert a.sum() == x.sum()
    del a
    gc.collect()
    assert lib.tensorfile_live() == live0, "still mapped after the last array is gone"
    checks += 1

# A read-write mapping: NumPy's write reaches the file.
p = os.path.join(d, "rw.npy")
np.save(p, np.zeros((4, 4), np.float32))
f = GoFile(p, NPY, rw=True)
a = np.from_dlpack(f.tensor(0))
assert inside(a, f.range()) and a.flags.writeable
a[1, 2] = 42.5
b = np.from_dlpack(f.tensor(0))  # a second view of the same mapping sees it
assert b[1, 2] == 42.5 and b.ctypes.data == a.ctypes.data
f.close()
del a, b
gc.collect()
assert lib.tensorfile_live() == live0
assert np.load(p)[1, 2] == 42.5, "the write did not reach the file"
checks += 1

# safetensors: every tensor shares the mapping.
ts = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.arange(5, dtype=np.int64),
      "m": np.eye(3, dtype=np.float64)}
p = os.path.join(d, "st.safetensors")
safetensors.numpy.save_file(ts, p)
f = GoFile(p, ST)
rng = f.range()
arrays = [np.from_dlpack(f.tensor(i)) for i in range(3)]
for a in arrays:
    assert inside(a, rng) and not a.flags.writeable
assert sorted(a.tobytes() for a in arrays) == sorted(v.tobytes() for v in ts.values())
f.close()
del arrays, a
gc.collect()
assert lib.tensorfile_live() == live0
checks += 1

# .npz: a member Go wrote aligned (stored) shares the archive's mapping.
p = os.path.join(d, "z.npz")
np.savez(p, x=np.arange(6, dtype=np.uint8))  # one-byte elements: any offset suits
f = GoFile(p, NPZ)
a = np.from_dlpack(f.tensor(0))
assert inside(a, f.range()) and np.array_equal(a, np.arange(6, dtype=np.uint8))
f.close()
del a
gc.collect()
assert lib.tensorfile_live() == live0
checks += 1
print(f"{checks} files: NumPy shares the Go mapping; unmapped after the last array")
