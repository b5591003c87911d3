"""Re-export: a NumPy array imported into Go (an owned dlpack.Foreign held
by Go) and handed on to JAX and NumPy without a copy, and a Python producer
wrapped by Go (pycapsule.Object) that passes each request on. NumPy's
deleter is counted through the array's reference count: the capsule's
tensor holds one reference to the array until its deleter runs, so the
count is back to where it was exactly when that deleter ran once (a second
run would take it below)."""
import gc
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import godlpack

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlpack.outstanding() == 0
    assert godlpack.live() == 0


def aligned(shape, dtype, align=64):
    """A zeroed NumPy array whose data is align-byte aligned (JAX shares
    only 64-byte aligned memory)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = np.zeros(n + align, np.uint8)
    off = -buf.ctypes.data % align
    return buf[off:off + n].view(dtype).reshape(shape)


def filled(shape, dtype):
    x = aligned(shape, dtype)
    n = x.size
    v = np.arange(n).reshape(shape) * 3 - 5
    if dtype is np.bool_:
        x[...] = v % 2 == 0
    elif np.issubdtype(dtype, np.complexfloating):
        x[...] = v + 0.25j * v
    else:
        x[...] = (v / 2 if np.issubdtype(np.dtype(dtype), np.floating) or dtype is ml_dtypes.bfloat16 else v).astype(dtype)
    return x


def refs(x):
    return sys.getrefcount(x) - 1  # without getrefcount's own argument


# The orders in which the Go owner and the two consumers let go.
ORDERS = {
    "go first": ("go", "jax", "numpy"),
    "consumers first": ("jax", "numpy", "go"),
    "go between": ("numpy", "go", "jax"),
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_numpy_go_jax_and_numpy_zero_copy(order):
    x = filled((4, 8), np.float32)
    before = refs(x)
    t = godlpack.GoTensor.from_dlpack(x)  # NumPy -> Go: versioned, writable
    assert refs(x) == before + 1, "NumPy's capsule tensor holds the array"
    assert t.data_address == x.ctypes.data
    held = {
        "go": t,
        "jax": jnp.from_dlpack(t),  # Go -> JAX: a legacy capsule of the same memory
        "numpy": np.from_dlpack(t),  # Go -> NumPy: versioned, writable
    }
    assert held["jax"].unsafe_buffer_pointer() == x.ctypes.data, "JAX shares NumPy's memory"
    assert np.asarray(held["jax"]).tobytes() == x.tobytes()
    n = held["numpy"]
    assert n.ctypes.data == x.ctypes.data and n.flags.writeable
    assert n.tobytes() == x.tobytes()
    total, versioned, read_only, _ = godlpack.consume_sum(t)  # and back into Go through Python
    assert (total, versioned, read_only) == (float(x.sum()), True, False)
    del n
    for i, who in enumerate(ORDERS[order]):
        assert refs(x) == before + 1, f"NumPy's deleter ran before {who} let go"
        obj = held.pop(who)
        if who == "go":
            obj.close()
        del obj
        gc.collect()
    assert refs(x) == before, "NumPy's deleter ran once, after the last one let go"


def test_writes_through_the_chain_reach_numpy():
    x = filled((3, 3), np.float64)
    t = godlpack.GoTensor.from_dlpack(x)
    n = np.from_dlpack(t)
    n[1, 1] = 42.0
    assert x[1, 1] == 42.0, "the same memory"
    del n
    t.close()


def test_read_only_numpy_stays_read_only():
    x = filled((2, 5), np.int64)
    x.flags.writeable = False
    before = refs(x)
    t = godlpack.GoTensor.from_dlpack(x)
    total, versioned, read_only, _ = godlpack.consume_sum(t)
    assert read_only and versioned and total == float(x.sum())
    n = np.from_dlpack(t)  # versioned: shared, READ_ONLY kept
    assert n.ctypes.data == x.ctypes.data and not n.flags.writeable
    j = jnp.from_dlpack(t)  # JAX asks for legacy, which cannot say read-only: a copy
    assert j.unsafe_buffer_pointer() != x.ctypes.data
    assert np.asarray(j).tobytes() == x.tobytes()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)  # legacy, copy forbidden
    c = np.from_dlpack(t, copy=True)
    assert c.ctypes.data != x.ctypes.data and c.flags.writeable and c.tobytes() == x.tobytes()
    t.close()
    del n, j, c
    gc.collect()
    assert refs(x) == before


def test_legacy_source_is_read_only_unless_assumed_writable():
    x = filled((6,), np.float32)
    cap = x.__dlpack__()  # NumPy's legacy capsule carries no flags
    t = godlpack.GoTensor.from_dlpack(cap)
    n = np.from_dlpack(t)
    assert n.ctypes.data == x.ctypes.data and not n.flags.writeable, "legacy imports are read-only"
    del n
    t.close()
    t = godlpack.GoTensor.from_dlpack(x.__dlpack__(), assume_writable=True)
    n = np.from_dlpack(t)
    assert n.ctypes.data == x.ctypes.data and n.flags.writeable
    del n
    t.close()


JAX_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", JAX_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_reexported(dtype):
    x = filled((3, 4), dtype)
    before = refs(x)
    t = godlpack.GoTensor.from_dlpack(x)
    n = np.from_dlpack(t)
    j = jnp.from_dlpack(t)
    assert n.dtype == x.dtype and n.tobytes() == x.tobytes() and n.ctypes.data == x.ctypes.data
    assert j.dtype == x.dtype and np.asarray(j).tobytes() == x.tobytes()
    assert j.unsafe_buffer_pointer() == x.ctypes.data
    t.close()
    del n, j
    gc.collect()
    assert refs(x) == before


def test_bfloat16_from_jax_reexported_to_jax():
    x = filled((2, 3), ml_dtypes.bfloat16)
    y = jnp.asarray(x)
    t = godlpack.GoTensor.from_dlpack(y)  # JAX -> Go: legacy, read-only in Go
    j = jnp.from_dlpack(t)  # read-only and legacy again: a copy
    assert j.dtype == jnp.bfloat16 and np.asarray(j).tobytes() == x.tobytes()
    t.close()
    del j, y


def test_strided_view_reexported():
    base = filled((6, 8), np.float64)
    v = base[1::2, ::-3]
    t = godlpack.GoTensor.from_dlpack(v)
    n = np.from_dlpack(t)
    assert n.tolist() == v.tolist() and n.strides == v.strides
    assert n.ctypes.data == v.ctypes.data
    del n
    t.close()


def test_closed_tensor_refuses():
    t = godlpack.GoTensor.from_dlpack(filled((2,), np.float64))
    t.close()
    with pytest.raises(BufferError, match="freed"):
        t.__dlpack__()


class Recording:
    """A Python producer that records the arguments of each __dlpack__ call
    and answers through a NumPy array."""

    def __init__(self, x):
        self.x, self.calls = x, []

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.x.__dlpack__(**kwargs)


def test_wrapped_producer_gets_every_request():
    x = filled((2, 4), np.float32)
    rec = Recording(x)
    before = refs(rec)
    w = godlpack.GoTensor.wrap(rec)
    assert refs(rec) == before + 1, "Go holds the producer object"
    assert w.__dlpack_device__() == (1, 0)
    n = np.from_dlpack(w)
    assert n.ctypes.data == x.ctypes.data
    assert rec.calls[-1].get("max_version") == (1, 0)  # what NumPy asks for
    c = np.from_dlpack(w, copy=True)
    assert rec.calls[-1].get("copy") is True and c.ctypes.data != x.ctypes.data
    j = jnp.from_dlpack(w)  # JAX: __dlpack__(stream=None), legacy
    assert rec.calls[-1] == {} and j.unsafe_buffer_pointer() == x.ctypes.data
    # On the CPU the array API takes only stream=None: Go refuses any other
    # stream itself, as NumPy does, and nothing reaches the producer.
    calls = len(rec.calls)
    for stream in (5, -1):
        with pytest.raises(RuntimeError, match="stream"):
            w.__dlpack__(stream=stream, max_version=(1, 3))
    assert len(rec.calls) == calls
    w.close()
    assert refs(rec) == before, "Close dropped Go's reference"
    del n, c, j


def test_wrap_refuses_what_is_not_a_producer():
    with pytest.raises(TypeError, match="capsule"):
        godlpack.GoTensor.wrap(np.arange(3.0).__dlpack__())

    class BadDevice:
        def __dlpack_device__(self):
            return "cpu"

        def __dlpack__(self, **kwargs):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="__dlpack_device__"):
        godlpack.GoTensor.wrap(BadDevice())


def test_producer_exceptions_arrive_unchanged():
    class Failing:
        def __dlpack__(self, **kwargs):
            raise KeyError("from the producer")

    with pytest.raises(KeyError, match="from the producer"):
        godlpack.consume_sum(Failing())
    with pytest.raises(KeyError, match="from the producer"):
        godlpack.GoTensor.from_dlpack(Failing())

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(ValueError, match="returned 42"):
        godlpack.consume_sum(NotACapsule())


def test_versioned_fallback_for_old_producers():
    """A producer without max_version (NumPy 2.0, pyarrow 25) is asked again
    bare after its TypeError, as the array API's consumers do."""

    class Old:
        def __init__(self, x):
            self.x, self.calls = x, []

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return self.x.__dlpack__()

    old = Old(np.arange(5.0))
    total, versioned, read_only, _ = godlpack.consume_sum(old)
    assert (total, versioned, read_only) == (10.0, False, True)
    assert old.calls == [None]


def test_jax_producer_wrapped_and_reexported_to_numpy():
    """JAX answers every request with a legacy capsule: NumPy gets it
    through a wrapped JAX array (the capsule's name decides the struct)
    and through a Go import of it (read-only, shared)."""
    y = jnp.arange(12.0).reshape(3, 4)
    want = np.asarray(y)
    w = godlpack.GoTensor.wrap(y)
    a = np.from_dlpack(w)
    assert a.tolist() == want.tolist() and a.ctypes.data == y.unsafe_buffer_pointer()
    t = godlpack.GoTensor.from_dlpack(y)
    b = np.from_dlpack(t)
    assert b.tolist() == want.tolist() and b.ctypes.data == y.unsafe_buffer_pointer()
    assert not b.flags.writeable, "a legacy import is read-only"
    w.close()
    t.close()
    del a, b
