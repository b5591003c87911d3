"""Go tensors for Python, through DLPack and libgodlpack (a C shared library
built from Go with package pycapsule). GoTensor implements the DLPack
protocol, so NumPy, JAX and others accept it (numpy.from_dlpack); it holds
Go memory, a tensor Go imported from another producer (handed on without a
copy), or a wrapped Python producer. consume_sum and copy_out hand any
DLPack producer to Go."""
import ctypes
import os

_lib = ctypes.PyDLL(os.environ.get("GODLPACK_LIB", os.path.join(os.path.dirname(__file__), "libgodlpack.so")))
_obj = ctypes.py_object
_lib.godlpack_init.restype = ctypes.c_int
_lib.godlpack_arange.restype = ctypes.c_int64
_lib.godlpack_arange.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_lib.godlpack_from_bytes.restype = ctypes.c_int64
_lib.godlpack_from_bytes.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                     ctypes.c_char_p, ctypes.c_int64, ctypes.c_int]
_lib.godlpack_import.restype = ctypes.c_int64
_lib.godlpack_import.argtypes = [_obj, ctypes.c_int]
_lib.godlpack_wrap.restype = ctypes.c_int64
_lib.godlpack_wrap.argtypes = [_obj]
_lib.godlpack_free.argtypes = [ctypes.c_int64]
_lib.godlpack_live.restype = ctypes.c_int64
_lib.godlpack_data_addr.restype = ctypes.c_size_t
_lib.godlpack_data_addr.argtypes = [ctypes.c_int64]
_lib.godlpack_dlpack.restype = _obj  # a new reference, or NULL with an exception set
_lib.godlpack_dlpack.argtypes = [ctypes.c_int64, _obj, _obj, _obj, _obj]
_lib.godlpack_dlpack_device.restype = _obj
_lib.godlpack_dlpack_device.argtypes = [ctypes.c_int64]
_lib.godlpack_consume.restype = ctypes.c_int
_lib.godlpack_consume.argtypes = [_obj, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
                                  ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
_lib.godlpack_copy_out.restype = ctypes.c_int64
_lib.godlpack_copy_out.argtypes = [_obj, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
_lib.godlpack_outstanding.restype = ctypes.c_int64
_lib.godlpack_go_heap.restype = ctypes.c_int64
if _lib.godlpack_init() != 0:
    raise ImportError("libgodlpack: CPython C API not found in this process")

COMPLEX = 5  # the DLPack type code of complex numbers


class GoTensor:
    """A tensor held by Go, by id in the library's registry. GoTensor(rows,
    cols) is Go float64 memory 0, 1, 2, ...; from_bytes copies any supported
    element type into Go memory; from_dlpack imports another producer's
    tensor into Go (re-exported without a copy); wrap passes every request
    on to a Python producer. Its __dlpack__ is pycapsule.DLPack in Go."""

    def __init__(self, rows, cols, readonly=False, _id=None):
        self._id = _id if _id is not None else _lib.godlpack_arange(rows, cols, 1 if readonly else 0)

    @classmethod
    def from_bytes(cls, code, bits, shape, data, readonly=False):
        """A Go tensor of DLPack type (code, bits) and the given shape
        holding a copy of data (bytes, native order, row-major): exactly
        the shape's size, else ValueError."""
        sh = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        data = bytes(data)
        i = _lib.godlpack_from_bytes(code, bits, sh, len(shape), data, len(data), 1 if readonly else 0)
        return cls(0, 0, _id=i)

    @classmethod
    def from_dlpack(cls, obj, assume_writable=False):
        """Imports obj's tensor (any __dlpack__ producer, or a capsule) into
        Go, which owns it until close(); handed on from here, it is shared,
        not copied."""
        return cls(0, 0, _id=_lib.godlpack_import(obj, 1 if assume_writable else 0))

    @classmethod
    def wrap(cls, obj):
        """A Go producer that passes each __dlpack__ request on to obj."""
        return cls(0, 0, _id=_lib.godlpack_wrap(obj))

    def close(self):
        """Drops Go's handle now (also done when the object dies)."""
        if self._id > 0:
            _lib.godlpack_free(self._id)
            self._id = 0
        self.__dict__.pop("_dlpack_c_export", None)  # what the exchange table keeps for this object

    def __del__(self):
        self.close()

    @property
    def data_address(self):
        return _lib.godlpack_data_addr(self._id)

    def __dlpack_device__(self):
        return _lib.godlpack_dlpack_device(self._id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _lib.godlpack_dlpack(self._id, stream, max_version, dl_device, copy)


def consume_sum(obj):
    """Hands obj (any DLPack producer, or a capsule) to Go, which asks for
    a versioned capsule (bare __dlpack__() on TypeError) and sums it, any
    element type; returns (sum, versioned, read_only, compact). The sum is
    complex for complex tensors, a float otherwise (bools count 1)."""
    re, im, code, info = ctypes.c_double(), ctypes.c_double(), ctypes.c_int(), ctypes.c_int()
    if _lib.godlpack_consume(obj, ctypes.byref(re), ctypes.byref(im), ctypes.byref(code), ctypes.byref(info)) != 0:
        raise RuntimeError("unreachable: the library set a Python exception")
    total = complex(re.value, im.value) if code.value == COMPLEX else re.value
    return total, bool(info.value & 1), bool(info.value & 2), bool(info.value & 4)


consume_capsule = consume_sum  # a capsule is consumed directly


def copy_out(obj, nbytes):
    """Hands obj (any DLPack producer, or a capsule) to Go and returns
    (code, bits, the elements' bytes in row-major order) as Go read them."""
    buf = ctypes.create_string_buffer(max(nbytes, 1))
    code, bits = ctypes.c_int(), ctypes.c_int()
    n = _lib.godlpack_copy_out(obj, buf, nbytes, ctypes.byref(code), ctypes.byref(bits))
    return code.value, bits.value, buf.raw[:n]


def outstanding():
    """Go exports not yet released by their consumers."""
    return _lib.godlpack_outstanding()


def live():
    """Tensors held in the library's registry."""
    return _lib.godlpack_live()


def go_heap():
    """The Go heap in use in bytes, after a GC."""
    return _lib.godlpack_go_heap()


def _from_id(i):
    """The GoTensor of registry id i: how GoTensor's exchange table
    (managed_tensor_to_py_object_no_sync) makes instances."""
    return GoTensor(0, 0, _id=i)


# GoTensor is a DLPack 1.3 producer in the C exchange API: the library sets
# GoTensor.__dlpack_c_exchange_api__, and consumers that read it (tvm-ffi)
# exchange through C calls instead of __dlpack__.
_lib.godlpack_publish.restype = ctypes.c_int
_lib.godlpack_publish.argtypes = [_obj, _obj]
_lib.godlpack_exchange_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
_lib.godlpack_take_many.restype = ctypes.c_int
_lib.godlpack_take_many.argtypes = [_obj, ctypes.c_int64]
_lib.godlpack_view_many.restype = ctypes.c_int
_lib.godlpack_view_many.argtypes = [_obj, ctypes.c_int64]
_lib.godlpack_publish(GoTensor, _from_id)

EXCHANGE_STATS = ("from_py", "to_py", "dltensor", "allocator", "stream", "failures", "exports", "live_exports",
                  "live_lent", "table_imports", "protocol_imports", "table_views")


def exchange_stats():
    """Counters of the exchange API in the library: calls of each entry of
    GoTensor's table and failures; exports made for objects (one per
    object), those alive, and lent tensors alive; Python objects Go took in
    through their type's table or through __dlpack__."""
    a = (ctypes.c_int64 * len(EXCHANGE_STATS))()
    _lib.godlpack_exchange_stats(a)
    return dict(zip(EXCHANGE_STATS, a))


def take_many(obj, n):
    """Go takes obj's tensor n times in one call (through the type's
    exchange table if it has one, else __dlpack__), releasing it each time."""
    _lib.godlpack_take_many(obj, n)


def view_many(obj, n):
    """Go views obj's tensor n times in one call (through the DLTensor entry
    of the type's exchange table if it has one, else as take_many)."""
    _lib.godlpack_view_many(obj, n)
