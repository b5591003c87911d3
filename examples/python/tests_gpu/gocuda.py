"""What the GPU suite asks of libgodlpack beyond godlpack.py (the exports
of examples/python/libgodlpack/gpu.go): imports with options, re-exports
that pass the consumer's stream on to the Python producer, what Go sees of
an imported tensor, a CPU read that names the sentinel error refusing it,
and the library's counters. Framework-free: it imports no GPU framework."""
import ctypes

import godlpack

_lib = godlpack._lib
_lib.godlpack_import_opts.restype = ctypes.c_int64
_lib.godlpack_import_opts.argtypes = [ctypes.py_object, ctypes.c_int]
_lib.godlpack_tensor_info.restype = ctypes.c_int
_lib.godlpack_tensor_info.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
_lib.godlpack_cpu_sum.restype = ctypes.c_int
_lib.godlpack_cpu_sum.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
                                  ctypes.c_char_p, ctypes.c_int]
_lib.godlpack_gpu_stats.restype = None
_lib.godlpack_gpu_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
_lib.godlpack_import_table.restype = ctypes.c_int64
_lib.godlpack_import_table.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
_lib.godlpack_work_stream.restype = ctypes.c_int
_lib.godlpack_work_stream.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
_lib.godlpack_go_version.restype = None
_lib.godlpack_go_version.argtypes = [ctypes.c_char_p, ctypes.c_int]

# The sentinels godlpack_cpu_sum names, by its return value.
SENTINELS = [None, "ErrDevice", "ErrReadOnly", "ErrClosed", "ErrDataType", "ErrAlignment", "other"]

# Filled by the cases, written by conftest.py into the matrix: figures
# (name -> text) and what a case observed (nodeid -> text).
FIGURES = {}
NOTES = {}

# DLPack device types and flags (include/dlpack/dlpack.h).
CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2


class GoError(Exception):
    """A Go error, with the name of the dlpack sentinel it wraps."""

    def __init__(self, sentinel, message):
        super().__init__(f"{sentinel}: {message}")
        self.sentinel = sentinel


def go_import(obj, *, assume_writable=False, allow_host_memory=False, forward_stream=True):
    """Imports obj's tensor (obj.__dlpack__(max_version=(1, 3)), stream
    None) into Go as an owned Foreign held by a GoTensor, which hands it on
    without a copy. forward_stream keeps obj as well, so that a consumer's
    __dlpack__(stream=s) on the GoTensor reaches obj.__dlpack__(stream=s)."""
    flags = (1 if assume_writable else 0) | (2 if allow_host_memory else 0) | (4 if forward_stream else 0)
    return godlpack.GoTensor(0, 0, _id=_lib.godlpack_import_opts(obj, flags))


def exchange_table(obj):
    """The address of the DLPackExchangeAPI that obj's type publishes in
    __dlpack_c_exchange_api__, or None."""
    cap = getattr(type(obj), "__dlpack_c_exchange_api__", None)
    if cap is None:
        return None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(cap, b"dlpack_exchange_api")


def go_import_table(obj, *, assume_writable=False, allow_host_memory=False):
    """Imports obj's tensor into Go through its type's exchange table
    (managed_tensor_from_py_object_no_sync: no stream synchronised)."""
    api = exchange_table(obj)
    if api is None:
        raise TypeError(f"{type(obj).__name__} publishes no __dlpack_c_exchange_api__")
    flags = (1 if assume_writable else 0) | (2 if allow_host_memory else 0)
    return godlpack.GoTensor(0, 0, _id=_lib.godlpack_import_table(obj, api, flags))


def work_stream(obj, device):
    """What the current_work_stream of obj's type's exchange table reports
    for device (type, id), asked by Go."""
    out = ctypes.c_int64()
    _lib.godlpack_work_stream(exchange_table(obj), device[0], device[1], ctypes.byref(out))
    return out.value


def info(t):
    """What Go sees of the imported tensor t (a GoTensor from go_import)."""
    buf = (ctypes.c_int64 * (12 + 2 * 64))()
    n = _lib.godlpack_tensor_info(t._id, buf, len(buf))
    v = list(buf[:n])
    nd = v[5]
    return {
        "device": (v[0], v[1]), "dtype": (v[2], v[3], v[4]), "ndim": nd, "writable": bool(v[6]),
        "legacy": bool(v[7]), "flags": v[8], "addr": v[9] & (2**64 - 1), "byte_offset": v[10], "numel": v[11],
        "shape": tuple(v[12:12 + nd]), "strides": tuple(v[12 + nd:12 + 2 * nd]),
    }


def cpu_sum(t):
    """Go reads the imported tensor t on the CPU and returns the sum of its
    elements; a refusal raises GoError naming the sentinel."""
    re, im = ctypes.c_double(), ctypes.c_double()
    msg = ctypes.create_string_buffer(512)
    code = _lib.godlpack_cpu_sum(t._id, ctypes.byref(re), ctypes.byref(im), msg, len(msg))
    if code:
        raise GoError(SENTINELS[min(code, len(SENTINELS) - 1)], msg.value.decode())
    return complex(re.value, im.value) if im.value else re.value


def stats():
    """Go's counters: outstanding exports, the dlpack.Stats counters, and
    the streams passed on to producers (count, last)."""
    v = (ctypes.c_int64 * 8)()
    _lib.godlpack_gpu_stats(v)
    keys = ("outstanding", "go_exports", "buffer_exports", "leaked_imports", "bad_releases", "c_blocks",
            "stream_syncs", "last_stream")
    return dict(zip(keys, v))


def go_version():
    buf = ctypes.create_string_buffer(64)
    _lib.godlpack_go_version(buf, len(buf))
    return buf.value.decode()


def capsule_name(capsule):
    """The name of a DLPack capsule: "dltensor_versioned" or "dltensor"."""
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return name(capsule).decode()


def capsule_flags(capsule):
    """The flags field of a versioned capsule's DLManagedTensorVersioned
    (read with ctypes: an independent reader of what Go handed out). The
    capsule is left unconsumed."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(capsule, b"dltensor_versioned")
    # version (2 x uint32), manager_ctx, deleter, then uint64 flags.
    return ctypes.c_uint64.from_address(p + 8 + 2 * ctypes.sizeof(ctypes.c_void_p)).value
