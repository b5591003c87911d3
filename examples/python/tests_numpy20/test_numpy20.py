"""Go <-> NumPy 2.0.2, the oldest 2.x: its __dlpack__ takes no max_version
and its from_dlpack asks for (and imports) legacy capsules only, read-only."""
import gc
import sys

import numpy as np
import pytest

import godlpack

assert np.__version__.startswith("2.0."), np.__version__


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlpack.outstanding() == 0


def test_go_to_numpy20_legacy():
    t = godlpack.GoTensor(2, 3)
    a = np.from_dlpack(t)
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert a.ctypes.data == t.data_address
    assert not a.flags.writeable, "NumPy 2.0 marks imports read-only"
    del a


def test_read_only_go_memory_copied():
    t = godlpack.GoTensor(2, 2, readonly=True)
    a = np.from_dlpack(t)  # a legacy request: answered with a copy
    assert a.tolist() == [[0, 1], [2, 3]]
    assert a.ctypes.data != t.data_address
    del a
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)


def test_numpy20_reexported():
    x = np.arange(8.0)
    before = sys.getrefcount(x)
    t = godlpack.GoTensor.from_dlpack(x)  # legacy, read-only in Go
    a = np.from_dlpack(t)  # NumPy 2.0 asks for legacy again: a copy of read-only data
    assert a.tolist() == x.tolist() and a.ctypes.data != x.ctypes.data
    w = godlpack.GoTensor.from_dlpack(x, assume_writable=True)
    b = np.from_dlpack(w)  # writable, so shared
    assert b.ctypes.data == x.ctypes.data
    t.close()
    w.close()
    del a, b
    gc.collect()
    assert sys.getrefcount(x) == before, "NumPy's deleters ran"


def test_numpy20_to_go_falls_back():
    x = np.arange(6.0)
    with pytest.raises(TypeError):
        x.__dlpack__(max_version=(1, 0))
    total, versioned, read_only, compact = godlpack.consume_sum(x)
    assert (total, versioned, read_only, compact) == (15.0, False, True, True)


def test_numpy20_layouts_to_go():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (x, x.T, x[::-1, ::2], np.asfortranarray(x), x[1:, 2:]):
        _, _, raw = godlpack.copy_out(view, view.nbytes)
        assert raw == np.ascontiguousarray(view).tobytes()


def test_unconsumed_and_twice():
    t = godlpack.GoTensor(1, 2)
    caps = [t.__dlpack__() for _ in range(5)]
    del caps
    cap = np.arange(3.0).__dlpack__()
    godlpack.consume_capsule(cap)
    with pytest.raises(ValueError, match="consumed only once"):
        godlpack.consume_capsule(cap)
