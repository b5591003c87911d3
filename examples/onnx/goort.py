"""ONNX Runtime run from Go on NumPy (or any DLPack) tensors, through
libpybridges (the C shared library built from Go for the bridges' Python
tests, ./internal/libpybridges; $PYBRIDGES_LIB, by default
.build/libpybridges.so at the top of the repository), packages dlonnx and
pycapsule. Inputs go to Go by DLPack and are shared with ONNX Runtime;
the output comes back by DLPack, in the memory ONNX Runtime wrote."""
import ctypes
import glob
import os

import onnxruntime

_lib = ctypes.PyDLL(os.environ.get("PYBRIDGES_LIB", os.path.join(os.path.dirname(__file__), "..", "..", ".build", "libpybridges.so")))
_lib.pybridges_init.restype = ctypes.c_int
_lib.pybridges_free.argtypes = [ctypes.c_int64]
_lib.dlonnx_init.restype = ctypes.c_int
_lib.dlonnx_init.argtypes = [ctypes.c_char_p]
_lib.dlonnx_open.restype = ctypes.c_int64
_lib.dlonnx_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
_lib.dlonnx_open_adopting.restype = ctypes.c_int64
_lib.dlonnx_open_adopting.argtypes = [ctypes.c_char_p]
_lib.dlonnx_run_adopt.restype = ctypes.py_object
_lib.dlonnx_run_adopt.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_int]
_lib.dlonnx_run.restype = ctypes.py_object  # a new reference, or NULL with an exception set
_lib.dlonnx_run.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_char_p,
                            ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_size_t]
_lib.dlonnx_last_equal.restype = ctypes.c_int
_lib.dlonnx_input_addr.restype = ctypes.c_size_t
_lib.dlonnx_input_addr.argtypes = [ctypes.c_int]
_lib.dlonnx_input_copied.restype = ctypes.c_int
_lib.dlonnx_input_copied.argtypes = [ctypes.c_int]
_lib.dlonnx_output_addr.restype = ctypes.c_size_t
_lib.pybridges_outstanding.restype = ctypes.c_int64
_lib.pybridges_go_heap.restype = ctypes.c_int64


def ort_library():
    """The libonnxruntime.so that the onnxruntime wheel ships."""
    found = glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*"))
    if not found:
        raise ImportError("the onnxruntime wheel has no libonnxruntime.so.* in onnxruntime/capi")
    return sorted(found)[0]


if _lib.pybridges_init() != 0:
    raise ImportError("libpybridges: CPython C API not found in this process")
_lib.dlonnx_init(ort_library().encode())  # raises if ONNX Runtime cannot be loaded

KDLCPU = 1


class Output:
    """The output of one run: a DLPack producer (numpy.from_dlpack takes
    it once) over the memory ONNX Runtime wrote."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack_device__(self):
        return (KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None and stream != -1:
            raise BufferError("goort: CPU tensors take stream=None")
        if dl_device is not None and tuple(dl_device) != (KDLCPU, 0):
            raise BufferError(f"goort: unsupported device requested: {dl_device}")
        if copy:
            raise BufferError("goort: the output is handed over as it is (copy=True refused)")
        if max_version is None or max_version[0] < 1:
            raise BufferError("goort: the output is a versioned (DLPack 1.x) tensor")
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("goort: the output was already taken")
        return capsule


class _Handle:
    """A Go object of the bridges' library, freed by close() or when
    collected."""

    _id = 0

    def close(self):
        if self._id:
            _lib.pybridges_free(self._id)
            self._id = 0

    def __del__(self):
        self.close()


class Session(_Handle):
    """A model run by ONNX Runtime from Go: Session(path, ["X", "W"], "Y")."""

    def __init__(self, path, inputs, output):
        self._id = _lib.dlonnx_open(str(path).encode(), ",".join(inputs).encode(), output.encode())

    def run(self, *inputs, dtype, shape, expect=None):
        """Hands each input to Go by DLPack (versioned), runs the model and
        returns its output (of the given dtype name and shape) as a DLPack
        producer. With expect (any DLPack producer), Go also compares the
        output with it bit for bit: see last_equal."""
        capsules = [_capsule(x) for x in inputs]
        ptrs = (ctypes.c_size_t * len(capsules))(*[id(c) for c in capsules])
        sh = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        want = None if expect is None else _capsule(expect)
        return Output(_lib.dlonnx_run(self._id, ptrs, len(capsules), dtype.encode(), sh, len(shape),
                                     0 if want is None else id(want)))


class AdoptingSession(_Handle):
    """A model run from Go by a dlonnx Session: ONNX Runtime allocates the
    outputs, in any shape the data gives, and Go hands them on without a
    copy. AdoptingSession(path); inputs in the model's order."""

    def __init__(self, path):
        self._id = _lib.dlonnx_open_adopting(str(path).encode())

    def run(self, *inputs, output=0):
        """Hands each input to Go by DLPack, runs the model and returns
        output number `output` as a DLPack producer over ONNX Runtime's
        memory."""
        capsules = [_capsule(x) for x in inputs]
        ptrs = (ctypes.c_size_t * max(len(capsules), 1))(*[id(c) for c in capsules])
        return Output(_lib.dlonnx_run_adopt(self._id, ptrs, len(capsules), output))


def _capsule(x):
    try:
        return x.__dlpack__(max_version=(1, 3))
    except TypeError:
        return x.__dlpack__()


def last_equal():
    """Whether Go found the last output equal, bit for bit, to the expected
    tensor of that run (None when none was given)."""
    r = _lib.dlonnx_last_equal()
    return None if r < 0 else bool(r)


def input_address(i):
    """The address of input i's memory as ONNX Runtime had it in the last run."""
    return _lib.dlonnx_input_addr(i)


def input_copied(i):
    """Whether input i of the last run was copied (strided or read-only)."""
    return bool(_lib.dlonnx_input_copied(i))


def output_address():
    """The address of the memory ONNX Runtime wrote the last output into."""
    return _lib.dlonnx_output_addr()


def outstanding():
    """Go exports not yet released by their consumers."""
    return _lib.pybridges_outstanding()


def go_heap():
    """The Go heap in use in bytes, after a GC."""
    return _lib.pybridges_go_heap()
