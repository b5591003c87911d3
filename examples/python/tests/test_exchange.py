"""The DLPack 1.3 C exchange API (__dlpack_c_exchange_api__) in a Python
process, against tvm-ffi (apache-tvm-ffi), a consumer written elsewhere
that reads the attribute, and against a caller written here in ctypes that
calls every entry of GoTensor's table directly. Counters in the Go library
(godlpack.exchange_stats) show which path each exchange took."""
import ctypes
import gc
import sys
import tracemalloc

import numpy as np
import pytest
import tvm_ffi
from tvm_ffi import core as tvm_core

import godlpack

echo = tvm_ffi.get_global_func("testing.echo")
apply = tvm_ffi.get_global_func("testing.apply")
use_count = tvm_ffi.get_global_func("testing.object_use_count")


@pytest.fixture(autouse=True)
def nothing_outstanding():
    live = godlpack.live()
    yield
    gc.collect()
    assert godlpack.outstanding() == 0
    assert godlpack.live() == live


def delta(before):
    """The counters that moved since before (the live_* gauges aside)."""
    after = godlpack.exchange_stats()
    return {k: after[k] - before[k] for k in after if after[k] != before[k] and not k.startswith("live_")}


def live():
    s = godlpack.exchange_stats()
    return s["live_exports"], s["live_lent"]


# ---- The table, seen from C (ctypes) ----------------------------------------

class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class Managed(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(Managed))
Managed._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
# Python-object entries are called with the GIL held (PYFUNCTYPE keeps it,
# and raises the exception an entry sets when it returns -1).
ALLOC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.POINTER(Managed)),
                          ctypes.c_void_p, SET_ERROR)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(Managed)))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(Managed), ctypes.POINTER(ctypes.c_void_p))
FROM_PY_DLTENSOR = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p), ("allocator", ALLOC),
                ("from_py", FROM_PY), ("to_py", TO_PY), ("dltensor_from_py", FROM_PY_DLTENSOR),
                ("current_work_stream", STREAM)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.c_void_p]


def table_of(cls):
    """The DLPackExchangeAPI of a type, as a consumer finds it."""
    return ExchangeAPI.from_address(_get_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api"))


def release(m):
    DELETER(m.contents.deleter)(m)


def steal_object(p):
    """The object of a new reference returned through a void** (ctypes
    takes a reference of its own: drop the entry's)."""
    obj = ctypes.cast(p, ctypes.py_object).value
    _decref(p)
    return obj


def test_go_tensor_type_publishes_a_1_3_table():
    cap = godlpack.GoTensor.__dlpack_c_exchange_api__
    assert 'capsule object "dlpack_exchange_api"' in repr(cap)
    assert "__dlpack_c_exchange_api__" in vars(godlpack.GoTensor), "on the type, as the spec says"
    api = table_of(godlpack.GoTensor)
    assert (api.version.major, api.version.minor) == (1, 3)
    assert api.prev_api is None
    for name, _ in ExchangeAPI._fields_[2:]:
        assert ctypes.cast(getattr(api, name), ctypes.c_void_p).value, f"{name} is set"
    assert ctypes.addressof(table_of(godlpack.GoTensor)) == ctypes.addressof(api), "one table for the process"


def test_managed_tensor_from_py_object():
    api = table_of(godlpack.GoTensor)
    t = godlpack.GoTensor(2, 3)
    out = ctypes.POINTER(Managed)()
    s = godlpack.exchange_stats()
    assert api.from_py(t, ctypes.byref(out)) == 0
    assert delta(s) == {"from_py": 1, "exports": 1} and live() == (1, 1)
    m = out.contents
    assert (m.version.major, m.version.minor) == (1, 3) and m.flags == 0
    d = m.dl_tensor
    assert d.data == t.data_address, "zero copy"
    assert (d.device_type, d.ndim, d.code, d.bits, d.lanes) == (1, 2, 2, 64, 1)
    assert [d.shape[i] for i in range(2)] == [2, 3] and [d.strides[i] for i in range(2)] == [3, 1]
    assert godlpack.outstanding() == 1
    out2 = ctypes.POINTER(Managed)()
    assert api.from_py(t, ctypes.byref(out2)) == 0
    assert out2.contents.dl_tensor.data == d.data and ctypes.addressof(out2.contents) != ctypes.addressof(m)
    assert delta(s) == {"from_py": 2, "exports": 1} and live() == (1, 2), "one export per object, one tensor per call"
    release(out)
    release(out2)
    assert live() == (1, 0) and godlpack.outstanding() == 1, "the object keeps its export"
    del t
    gc.collect()
    assert live() == (0, 0) and godlpack.outstanding() == 0, "released with the object"

    ro = godlpack.GoTensor(1, 2, readonly=True)
    assert api.from_py(ro, ctypes.byref(out)) == 0
    assert out.contents.flags == 1, "READ_ONLY is handed over, not dropped"
    assert out.contents.dl_tensor.data == ro.data_address
    release(out)


def test_entries_refuse_objects_not_ours():
    api = table_of(godlpack.GoTensor)
    out = ctypes.POINTER(Managed)()
    view = DLTensor()
    s = godlpack.exchange_stats()
    for obj in [np.arange(3.0), None, 7, tvm_ffi.from_dlpack(np.arange(2.0))]:
        with pytest.raises(TypeError, match="not an object of the type"):
            api.from_py(obj, ctypes.byref(out))
        with pytest.raises(TypeError, match="not an object of the type"):
            api.dltensor_from_py(obj, ctypes.byref(view))
    assert not out

    class Impostor:
        __dlpack_c_exchange_api__ = godlpack.GoTensor.__dlpack_c_exchange_api__
        _id = 1

    with pytest.raises(TypeError):
        api.from_py(Impostor(), ctypes.byref(out))
    assert delta(s) == {"from_py": 5, "dltensor": 4, "failures": 9}

    t = godlpack.GoTensor(1, 1)
    t.close()
    with pytest.raises(BufferError, match="freed"):
        api.from_py(t, ctypes.byref(out))

    class Sub(godlpack.GoTensor):
        pass

    sub = Sub(1, 3)
    assert api.from_py(sub, ctypes.byref(out)) == 0, "instances of subclasses are ours"
    release(out)


def test_managed_tensor_to_py_object():
    api = table_of(godlpack.GoTensor)
    # A tensor the table's allocator makes (C memory), handed to to_py.
    shape = (ctypes.c_int64 * 2)(2, 2)
    proto = DLTensor(device_type=1, ndim=2, code=2, bits=32, lanes=1, shape=shape)
    m = ctypes.POINTER(Managed)()
    assert api.allocator(ctypes.byref(proto), ctypes.byref(m), None, SET_ERROR(lambda *a: None)) == 0
    data = m.contents.dl_tensor.data
    ctypes.memmove(data, np.array([1, 2, 3, 4], np.float32).tobytes(), 16)
    out = ctypes.c_void_p()
    s = godlpack.exchange_stats()
    assert api.to_py(m, ctypes.byref(out)) == 0
    g = steal_object(out)
    assert type(g) is godlpack.GoTensor and g.data_address == data
    assert delta(s) == {"to_py": 1}
    a = np.from_dlpack(g)
    assert a.tolist() == [[1, 2], [3, 4]] and a.ctypes.data == data, "zero copy, Go owns it"
    assert godlpack.outstanding() == 2, "the allocator's tensor, and Go's re-export of it to NumPy"
    del a, g
    gc.collect()
    assert godlpack.outstanding() == 0, "both released"


def test_lent_tensors_released_on_many_threads():
    import threading
    api = table_of(godlpack.GoTensor)
    t = godlpack.GoTensor(4, 4)
    lent = []
    for _ in range(800):
        out = ctypes.POINTER(Managed)()
        assert api.from_py(t, ctypes.byref(out)) == 0
        lent.append(out)
    assert live() == (1, 800)
    start = threading.Barrier(8)

    def release_share(share):
        start.wait()
        for m in share:
            release(m)  # CFUNCTYPE: the GIL is released during the call

    threads = [threading.Thread(target=release_share, args=(lent[i::8],)) for i in range(7)]
    for th in threads:
        th.start()
    del t  # the object dies while the threads release
    gc.collect()
    release_share(lent[7::8])
    for th in threads:
        th.join()
    assert live() == (0, 0) and godlpack.outstanding() == 0, "the export released exactly once, by the last one"


def test_to_py_releases_a_tensor_it_refuses():
    api = table_of(godlpack.GoTensor)
    calls = []
    deleter = DELETER(lambda p: calls.append(1))
    shape = (ctypes.c_int64 * 1)(3)
    for version, ndim, why in [(2, 1, "version"), (1, -1, "ndim")]:
        calls.clear()
        m = Managed(version=DLPackVersion(version, 0), deleter=ctypes.cast(deleter, ctypes.c_void_p),
                    dl_tensor=DLTensor(data=16, device_type=1, ndim=ndim, code=2, bits=32, lanes=1, shape=shape,
                                       strides=shape))
        out = ctypes.c_void_p()
        with pytest.raises(BufferError, match=why):
            api.to_py(ctypes.byref(m), ctypes.byref(out))
        assert calls == [1], "ownership is stolen: released exactly once"
        assert not out


def test_dltensor_view_lives_as_long_as_the_object():
    api = table_of(godlpack.GoTensor)
    t = godlpack.GoTensor(3, 4)
    v1, v2 = DLTensor(), DLTensor()
    s = godlpack.exchange_stats()
    assert api.dltensor_from_py(t, ctypes.byref(v1)) == 0
    assert api.dltensor_from_py(t, ctypes.byref(v2)) == 0
    assert delta(s) == {"dltensor": 2, "exports": 1}, "the object's export, made once"
    assert v1.data == t.data_address and v1.byte_offset == 0
    assert ctypes.addressof(v1.shape.contents) == ctypes.addressof(v2.shape.contents), "the same storage"
    assert [v1.shape[i] for i in range(2)] == [3, 4] and [v1.strides[i] for i in range(2)] == [4, 1]
    assert godlpack.outstanding() == 1, "the export is held by the object"
    out = ctypes.POINTER(Managed)()
    assert api.from_py(t, ctypes.byref(out)) == 0
    del t
    gc.collect()
    assert godlpack.outstanding() == 1 and live() == (1, 1), "a lent tensor keeps the export after the object died"
    release(out)
    assert godlpack.outstanding() == 0 and live() == (0, 0), "released by the last one to let go"

    ro = godlpack.GoTensor(1, 2, readonly=True)
    with pytest.raises(BufferError, match="read-only"):
        api.dltensor_from_py(ro, ctypes.byref(v1))


def test_allocator_and_stream():
    api = table_of(godlpack.GoTensor)
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind, msg)))
    shape = (ctypes.c_int64 * 1)(5)
    m = ctypes.POINTER(Managed)()
    s = godlpack.exchange_stats()
    proto = DLTensor(device_type=1, ndim=1, code=0, bits=16, lanes=1, shape=shape)
    assert api.allocator(ctypes.byref(proto), ctypes.byref(m), None, set_error) == 0
    d = m.contents.dl_tensor
    assert d.data % 256 == 0 and ctypes.string_at(d.data, 10) == bytes(10), "zeroed, 256-byte aligned"
    release(m)
    proto.device_type = 2
    assert api.allocator(ctypes.byref(proto), ctypes.byref(m), None, set_error) == -1
    assert errors == [(b"BufferError", b"this allocator makes CPU tensors only")]
    stream = ctypes.c_void_p(1)
    for dev in [(1, 0), (2, 0), (10, 3)]:
        assert api.current_work_stream(dev[0], dev[1], ctypes.byref(stream)) == 0
        assert stream.value is None, "Go keeps no streams: the default stream"
    assert delta(s) == {"allocator": 2, "stream": 3, "failures": 1}


# ---- tvm-ffi ----------------------------------------------------------------

@pytest.fixture
def dlpack_calls(monkeypatch):
    """Counts calls of GoTensor.__dlpack__ (the slow path)."""
    calls = []
    orig = godlpack.GoTensor.__dlpack__

    def counting(self, **kw):
        calls.append(kw)
        return orig(self, **kw)

    monkeypatch.setattr(godlpack.GoTensor, "__dlpack__", counting)
    return calls


def test_tvm_ffi_takes_go_memory_through_the_table(dlpack_calls):
    t = godlpack.GoTensor(2, 3)
    s = godlpack.exchange_stats()
    x = tvm_ffi.from_dlpack(t)
    assert delta(s) == {"from_py": 1, "exports": 1} and dlpack_calls == [], "the table, not __dlpack__"
    assert x.data_ptr() == t.data_address, "zero copy"
    assert x.shape == (2, 3) and x.strides == (3, 1) and x.dtype == "float64" and x.device.dlpack_device_type() == 1
    a = np.from_dlpack(x)
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]] and a.ctypes.data == t.data_address
    a[1, 2] = 50
    assert godlpack.consume_sum(t)[0] == 60, "writes reach Go's memory"
    y = tvm_ffi.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and delta(s) == {"from_py": 2, "exports": 1, "table_imports": 1}
    assert live() == (1, 2)
    del a, x, y
    gc.collect()
    assert live() == (1, 0), "tvm-ffi called each deleter once"
    del t
    gc.collect()
    assert godlpack.outstanding() == 0 and live() == (0, 0)


def test_tvm_ffi_falls_back_to_dlpack_without_the_table(dlpack_calls, monkeypatch):
    t = godlpack.GoTensor(2, 3)
    monkeypatch.delattr(godlpack.GoTensor, "__dlpack_c_exchange_api__")
    s = godlpack.exchange_stats()
    x = tvm_ffi.from_dlpack(t)
    assert delta(s) == {} and dlpack_calls == [{}], "tvm-ffi asks __dlpack__() for a legacy capsule"
    assert x.data_ptr() == t.data_address and np.from_dlpack(x).tolist() == [[0, 1, 2], [3, 4, 5]]


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "bfloat16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tvm_ffi_every_dtype_through_the_table(dtype):
    rng = np.random.default_rng(7)
    if dtype == "bfloat16":
        raw = rng.integers(0, 1 << 16, size=(3, 5), dtype=np.uint16).tobytes()
        code, bits = 4, 16
    else:
        a = rng.integers(0, 2, size=(3, 5)).astype(dtype) if dtype == "bool" else \
            (rng.standard_normal((3, 5)) * 100).astype(dtype)
        raw = a.tobytes()
        code, bits = {"b": 6, "i": 0, "u": 1, "f": 2}[a.dtype.kind], a.dtype.itemsize * 8
    t = godlpack.GoTensor.from_bytes(code, bits, (3, 5), raw)
    s = godlpack.exchange_stats()
    x = tvm_ffi.from_dlpack(t)
    assert delta(s) == {"from_py": 1, "exports": 1}
    assert x.dtype == dtype and x.shape == (3, 5) and x.data_ptr() == t.data_address
    assert ctypes.string_at(x.data_ptr(), len(raw)) == raw, "bit for bit"
    if dtype != "bfloat16":
        assert np.from_dlpack(x).tobytes() == raw


def test_tvm_ffi_takes_read_only_go_memory_flagged(dlpack_calls):
    ro = godlpack.GoTensor(2, 2, readonly=True)
    s = godlpack.exchange_stats()
    x = tvm_ffi.from_dlpack(ro)
    assert delta(s) == {"from_py": 1, "exports": 1} and dlpack_calls == []
    assert x.data_ptr() == ro.data_address, "shared, handed over with READ_ONLY (see the ctypes test)"
    a = np.from_dlpack(x)
    assert a.tolist() == [[0, 1], [2, 3]]
    # tvm-ffi 0.1.15 keeps no flags: what it hands on is writable. Through
    # __dlpack__ it asks for a legacy tensor, and gets a copy instead.
    assert a.flags.writeable, "tvm-ffi now keeps READ_ONLY: update the matrix"
    del a, x
    api = godlpack.GoTensor.__dlpack_c_exchange_api__
    del godlpack.GoTensor.__dlpack_c_exchange_api__
    try:
        y = tvm_ffi.from_dlpack(ro)
    finally:
        godlpack.GoTensor.__dlpack_c_exchange_api__ = api
    assert y.data_ptr() != ro.data_address and np.from_dlpack(y).tolist() == [[0, 1], [2, 3]]


def test_tvm_ffi_functions_take_and_return_go_tensors():
    t = godlpack.GoTensor(2, 2)
    s = godlpack.exchange_stats()
    y = echo(t)
    assert delta(s) == {"from_py": 1, "exports": 1, "to_py": 1}, "argument in, result out, both through the table"
    assert type(y) is godlpack.GoTensor and y is not t
    assert y.data_address == t.data_address, "the same memory, as a new GoTensor"
    assert np.from_dlpack(y).tolist() == [[0, 1], [2, 3]]
    z = echo(tvm_ffi.from_dlpack(np.arange(3.0)))
    assert type(z) is tvm_ffi.Tensor, "without a Go argument tvm-ffi keeps its own type"


def test_tvm_ffi_allocates_through_our_allocator():
    lib = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi())
    lib.TVMFFIEnvGetDLPackManagedTensorAllocator.restype = ctypes.c_void_p
    lib.TVMFFIEnvTensorAlloc.argtypes = [ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.c_void_p)]
    lib.TVMFFIObjectDecRef.argtypes = [ctypes.c_void_p]
    ours = ctypes.cast(table_of(godlpack.GoTensor).allocator, ctypes.c_void_p).value
    seen = []

    def kernel(x):
        seen.append(lib.TVMFFIEnvGetDLPackManagedTensorAllocator())
        shape = (ctypes.c_int64 * 2)(4, 4)
        handle = ctypes.c_void_p()
        proto = DLTensor(device_type=1, ndim=2, code=2, bits=32, lanes=1, shape=shape)
        assert lib.TVMFFIEnvTensorAlloc(ctypes.byref(proto), ctypes.byref(handle)) == 0
        seen.append(godlpack.outstanding())
        lib.TVMFFIObjectDecRef(handle)
        seen.append(godlpack.outstanding())

    t = godlpack.GoTensor(1, 1)
    s = godlpack.exchange_stats()
    apply(kernel, t)
    assert seen[0] == ours, "during a call with a Go tensor argument, tvm-ffi allocates with our allocator"
    assert seen[2] == seen[1] - 1, "tvm-ffi released the tensor it allocated"
    assert delta(s) == {"from_py": 1, "exports": 1, "allocator": 1}


def test_tvm_tensors_come_into_go_through_their_table():
    src = np.arange(12.0).reshape(3, 4)
    x = tvm_ffi.from_dlpack(src)
    w = tvm_core.DLTensorTestWrapper(x)  # tvm-ffi's own type that publishes a table
    assert "__dlpack_c_exchange_api__" in vars(type(w))
    uses = use_count(x)
    s = godlpack.exchange_stats()
    assert godlpack.consume_sum(w)[0] == 66
    assert delta(s) == {"table_imports": 1}, "Go took it through tvm-ffi's table"
    g = godlpack.GoTensor.from_dlpack(w)
    assert g.data_address == src.ctypes.data, "zero copy"
    assert use_count(x) == uses + 1, "Go holds a reference to tvm-ffi's tensor"
    assert np.from_dlpack(g).tolist() == src.tolist()
    g.close()
    gc.collect()
    assert use_count(x) == uses, "released once"

    s = godlpack.exchange_stats()
    assert godlpack.consume_sum(x)[0] == 66, "tvm_ffi.Tensor publishes no table"
    assert delta(s) == {"protocol_imports": 1}, "so Go falls back to __dlpack__"


def test_no_python_objects_leak():
    t = godlpack.GoTensor(4, 4)
    w = tvm_core.DLTensorTestWrapper(tvm_ffi.from_dlpack(np.arange(6.0)))

    def rounds(n):
        for _ in range(n):
            tvm_ffi.from_dlpack(t)
            echo(t)
            godlpack.consume_sum(w)

    rounds(500)
    gc.collect()
    objects, refs_t, refs_cls = len(gc.get_objects()), sys.getrefcount(t), sys.getrefcount(godlpack.GoTensor)
    live = godlpack.live()
    rounds(5000)
    gc.collect()
    assert len(gc.get_objects()) <= objects, "no Python objects left behind"
    assert (sys.getrefcount(t), sys.getrefcount(godlpack.GoTensor)) == (refs_t, refs_cls)
    assert godlpack.live() == live
    tracemalloc.start()
    rounds(100)
    first = tracemalloc.take_snapshot()
    rounds(2000)
    gc.collect()
    grown = sum(st.size_diff for st in tracemalloc.take_snapshot().compare_to(first, "filename"))
    tracemalloc.stop()
    assert grown < 16 * 1024, f"Python memory grew by {grown} bytes over 2,000 rounds"
