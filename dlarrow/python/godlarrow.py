"""Package dlarrow inside Python, through libpybridges (the C shared
library built from Go for the bridges' Python tests, ./internal/libpybridges,
at $PYBRIDGES_LIB): GoArrow holds an Arrow array in Go (a pyarrow array moved
over the Arrow C Data Interface, or one Go built) and implements the DLPack
protocol, so numpy.from_dlpack and jax.numpy.from_dlpack take it.
to_arrow hands any DLPack producer to Go and brings back the pyarrow
array that Go made of it."""
import ctypes
import os

import pyarrow as pa

_lib = ctypes.PyDLL(os.environ["PYBRIDGES_LIB"])
_lib.pybridges_init.restype = ctypes.c_int
_lib.dlarrow_import_c.restype = ctypes.c_int64
_lib.dlarrow_import_c.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_lib.dlarrow_arange.restype = ctypes.c_int64
_lib.dlarrow_arange.argtypes = [ctypes.c_int64]
_lib.dlarrow_open_file.restype = ctypes.c_int64
_lib.dlarrow_open_file.argtypes = [ctypes.c_char_p]
_lib.dlarrow_file_column.restype = ctypes.c_int64
_lib.dlarrow_file_column.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int]
_lib.pybridges_free.argtypes = [ctypes.c_int64]
_lib.dlarrow_dlpack.restype = ctypes.py_object  # a new reference, or NULL with an exception set
_lib.dlarrow_dlpack.argtypes = [ctypes.c_int64] + [ctypes.py_object] * 4
_lib.dlarrow_unit.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
_lib.dlarrow_to_arrow.restype = ctypes.c_int
_lib.dlarrow_to_arrow.argtypes = [ctypes.py_object, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
_lib.pybridges_outstanding.restype = ctypes.c_int64
_lib.pybridges_live.restype = ctypes.c_int64
_lib.pybridges_go_heap.restype = ctypes.c_int64
if _lib.pybridges_init() != 0:
    raise ImportError("libpybridges: CPython C API not found in this process")

KDLCPU = 1
ARROW_ARRAY_SIZE = 80   # struct ArrowArray: 10 words
ARROW_SCHEMA_SIZE = 72  # struct ArrowSchema: 9 words


def _addr(buf):
    return ctypes.addressof(buf)


class GoArrow:
    """An Arrow array held by Go, with the DLPack protocol of dlarrow."""

    def __init__(self, array=None, *, _id=None):
        if _id is not None:
            self._id = _id
            return
        self._id = -1
        carr = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
        csch = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
        array._export_to_c(_addr(carr), _addr(csch))
        self._id = _lib.dlarrow_import_c(_addr(carr), _addr(csch))

    @classmethod
    def arange(cls, n):
        """A float64 array 0, 1, ..., n-1 built by Go (Go heap memory)."""
        return cls(_id=_lib.dlarrow_arange(n))

    def __del__(self):
        if self._id > 0:
            _lib.pybridges_free(self._id)

    @property
    def unit(self):
        buf = ctypes.create_string_buffer(16)
        _lib.dlarrow_unit(self._id, buf, 16)
        return buf.value.decode()

    def __dlpack_device__(self):
        return (KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _lib.dlarrow_dlpack(self._id, stream, max_version, dl_device, copy)


class MappedFile:
    """An Arrow IPC file mapped by Go; column() gives GoArrow tensors
    pointing into the mapping."""

    def __init__(self, path):
        self._id = _lib.dlarrow_open_file(os.fsencode(path))

    def column(self, col, batch=0):
        return GoArrow(_id=_lib.dlarrow_file_column(self._id, batch, col))

    def close(self):
        if self._id > 0:
            _lib.pybridges_free(self._id)
            self._id = -1

    __del__ = close


def to_arrow(obj, copy=False):
    """Hands obj (any DLPack producer) to Go, which wraps it as an Arrow
    array (sharing memory unless copy) and returns it as a pyarrow array
    through the C Data Interface."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 3))
    except TypeError:
        capsule = obj.__dlpack__()
    carr = ctypes.create_string_buffer(ARROW_ARRAY_SIZE)
    csch = ctypes.create_string_buffer(ARROW_SCHEMA_SIZE)
    _lib.dlarrow_to_arrow(capsule, _addr(carr), _addr(csch), 1 if copy else 0)
    return pa.Array._import_from_c(_addr(carr), _addr(csch))


def outstanding():
    """Go exports not yet released by their consumers."""
    return _lib.pybridges_outstanding()


def live():
    """Go objects Python still refers to."""
    return _lib.pybridges_live()


def go_heap():
    """The Go heap in use in bytes, after a GC."""
    return _lib.pybridges_go_heap()
