"""Go tensors for Python, through DLPack and libgodlpack (a C shared library
built from Go). GoTensor implements the DLPack protocol, so NumPy, JAX and
others accept it (numpy.from_dlpack); consume_sum hands any DLPack producer
to Go."""
import ctypes
import os

_lib = ctypes.PyDLL(os.environ.get("GODLPACK_LIB", os.path.join(os.path.dirname(__file__), "libgodlpack.so")))
_lib.godlpack_init.restype = ctypes.c_int
_lib.godlpack_arange.restype = ctypes.c_int64
_lib.godlpack_arange.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_lib.godlpack_free.argtypes = [ctypes.c_int64]
_lib.godlpack_data_addr.restype = ctypes.c_size_t
_lib.godlpack_data_addr.argtypes = [ctypes.c_int64]
_lib.godlpack_dlpack.restype = ctypes.py_object  # a new reference, or NULL with an exception set
_lib.godlpack_dlpack.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int]
_lib.godlpack_consume.restype = ctypes.c_int
_lib.godlpack_consume.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)]
_lib.godlpack_from_bytes.restype = ctypes.c_int64
_lib.godlpack_from_bytes.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                     ctypes.c_char_p, ctypes.c_int64, ctypes.c_int]
_lib.godlpack_copy_out.restype = ctypes.c_int64
_lib.godlpack_copy_out.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
_lib.godlpack_outstanding.restype = ctypes.c_int64
_lib.godlpack_go_heap.restype = ctypes.c_int64
if _lib.godlpack_init() != 0:
    raise ImportError("libgodlpack: CPython C API not found in this process")

KDLCPU = 1


class GoTensor:
    """A tensor owned by Go: GoTensor(rows, cols) is float64 0, 1, 2, ...;
    GoTensor.from_bytes copies any supported element type into Go."""

    def __init__(self, rows, cols, readonly=False, _id=None):
        self._id = _id if _id is not None else _lib.godlpack_arange(rows, cols, 1 if readonly else 0)

    @classmethod
    def from_bytes(cls, code, bits, shape, data, readonly=False):
        """A Go tensor of DLPack type (code, bits) and the given shape
        holding a copy of data (bytes, native order, row-major)."""
        sh = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        i = _lib.godlpack_from_bytes(code, bits, sh, len(shape), bytes(data), len(data), 1 if readonly else 0)
        return cls(0, 0, _id=i)

    def __del__(self):
        _lib.godlpack_free(self._id)

    @property
    def data_address(self):
        return _lib.godlpack_data_addr(self._id)

    def __dlpack_device__(self):
        return (KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None and stream != -1:
            raise BufferError("godlpack: CPU tensors take stream=None")
        if dl_device is not None and tuple(dl_device) != (KDLCPU, 0):
            raise BufferError(f"godlpack: unsupported device requested: {dl_device}")
        major = -1 if max_version is None else int(max_version[0])
        copy_mode = -1 if copy is None else int(bool(copy))
        return _lib.godlpack_dlpack(self._id, major, copy_mode)


def consume_capsule(capsule):
    """Imports a DLPack capsule into Go; returns (sum, versioned, read_only, compact)."""
    s, info = ctypes.c_double(), ctypes.c_int()
    if _lib.godlpack_consume(capsule, ctypes.byref(s), ctypes.byref(info)) != 0:
        raise RuntimeError("unreachable: the library set a Python exception")
    return s.value, bool(info.value & 1), bool(info.value & 2), bool(info.value & 4)


def consume_sum(obj, **kwargs):
    """Asks obj for a capsule the way array-API consumers do (versioned 1.3,
    falling back to a bare call on TypeError) and sums it in Go."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 3), **kwargs)
    except TypeError:
        capsule = obj.__dlpack__(**kwargs)
    return consume_capsule(capsule)


def copy_out(obj, nbytes, **kwargs):
    """Asks obj for a capsule (versioned 1.3, bare on TypeError), imports
    it into Go, and returns (code, bits, the elements' bytes in row-major
    order) as Go read them."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 3), **kwargs)
    except TypeError:
        capsule = obj.__dlpack__(**kwargs)
    return copy_out_capsule(capsule, nbytes)


def copy_out_capsule(capsule, nbytes):
    buf = ctypes.create_string_buffer(max(nbytes, 1))
    code, bits = ctypes.c_int(), ctypes.c_int()
    n = _lib.godlpack_copy_out(capsule, buf, nbytes, ctypes.byref(code), ctypes.byref(bits))
    return code.value, bits.value, buf.raw[:n]


def outstanding():
    """Go exports not yet released by their consumers."""
    return _lib.godlpack_outstanding()


def go_heap():
    """The Go heap in use in bytes, after a GC."""
    return _lib.godlpack_go_heap()
