"""Go <-> NumPy through DLPack capsules, with the real NumPy. Every test ends
with no Go export outstanding (the fixture checks), so nothing leaks."""
import gc
import sys

import numpy as np
import pytest

import godlpack


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlpack.outstanding() == 0


def test_numpy_imports_go_memory_zero_copy():
    t = godlpack.GoTensor(2, 3)
    a = np.from_dlpack(t)  # NumPy asks for a versioned capsule
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert a.dtype == np.float64 and a.flags.writeable
    assert a.ctypes.data == t.data_address, "same memory"
    a[0, 0] = 42
    assert np.from_dlpack(t)[0, 0] == 42, "writes reach Go's memory"
    assert godlpack.outstanding() >= 1
    del a


def test_go_owner_dropped_before_the_array():
    t = godlpack.GoTensor(1, 4)
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert a.sum() == 6, "the export keeps the data alive"
    del a


def test_version_negotiation():
    t = godlpack.GoTensor(1, 2)
    assert 'capsule object "dltensor"' in repr(t.__dlpack__())
    assert 'capsule object "dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))
    for v in [(1, 0), (1, 3), (2, 0)]:
        assert 'capsule object "dltensor_versioned"' in repr(t.__dlpack__(max_version=v))


def test_unconsumed_capsules_are_released():
    t = godlpack.GoTensor(3, 3)
    caps = [t.__dlpack__(max_version=(1, 3)) for _ in range(10)] + [t.__dlpack__() for _ in range(10)]
    assert godlpack.outstanding() == 20
    del caps


def test_capsule_dropped_while_an_exception_propagates():
    t = godlpack.GoTensor(2, 2)

    def holds_a_capsule_then_raises():
        cap = t.__dlpack__(max_version=(1, 3))  # noqa: F841
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):  # not a SystemError
        holds_a_capsule_then_raises()


def test_read_only_go_memory():
    t = godlpack.GoTensor(2, 2, readonly=True)
    a = np.from_dlpack(t)
    assert not a.flags.writeable, "READ_ONLY reaches NumPy"
    assert a.ctypes.data == t.data_address, "versioned: shared, not copied"
    # A legacy capsule cannot say read-only: the request is answered with a
    # copy, or refused when the consumer forbids copies.
    cap = t.__dlpack__()
    assert 'capsule object "dltensor"' in repr(cap)
    assert godlpack.consume_sum(cap)[0] == 6.0
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)
    del a


def test_copy_true_makes_a_copy():
    t = godlpack.GoTensor(2, 2)
    a = np.from_dlpack(t, copy=True)
    assert a.ctypes.data != t.data_address
    assert a.tolist() == [[0, 1], [2, 3]]
    del a


def test_stream_and_device_arguments():
    t = godlpack.GoTensor(1, 1)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(RuntimeError, match="stream"):
        t.__dlpack__(stream=-1)  # the array API: a CPU tensor takes only stream=None
    with pytest.raises(BufferError, match="request.device"):
        t.__dlpack__(dl_device=(2, 0))
    t.__dlpack__(stream=None, dl_device=(1, 0))  # the own device is fine


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_go_consumes_numpy(dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    cases = {
        "C order": x,
        "Fortran order": np.asfortranarray(x),
        "transpose": x.T,
        "step slice": x[:, ::2],
        "negative strides": x[::-1, ::-3],
        "broadcast": np.broadcast_to(x[0], (5, 4)),
        "0-d": x[1, 1][()],
        "zero-size": x[:0],
        "offset": x[1:, 1:],
    }
    for name, y in cases.items():
        y = np.asarray(y)
        total, versioned, read_only, compact = godlpack.consume_sum(y)
        assert total == float(y.sum()), name
        assert versioned, name
        assert compact == (y.flags.c_contiguous or y.size <= 1), name


def test_go_sees_numpy_read_only():
    x = np.arange(4.0)
    x.flags.writeable = False
    _, versioned, read_only, _ = godlpack.consume_sum(x)
    assert versioned and read_only


def test_a_capsule_is_consumed_once():
    x = np.arange(3.0)
    cap = x.__dlpack__(max_version=(1, 0))
    assert godlpack.consume_capsule(cap)[0] == 3.0
    assert 'capsule object "used_dltensor_versioned"' in repr(cap)
    with pytest.raises(ValueError, match="consumed only once"):
        godlpack.consume_capsule(cap)


def test_go_rejects_and_releases():
    x = np.arange(3, dtype=np.uint16)
    before = sys.getrefcount(x)
    with pytest.raises(BufferError, match="6 bytes needed, 4 given"):
        godlpack.copy_out(x, 4)  # imported, then refused by the Go consumer
    assert sys.getrefcount(x) == before, "NumPy's deleter ran"
    with pytest.raises(TypeError, match="no __dlpack__"):
        godlpack.consume_sum([1, 2, 3])


def test_many_round_trips_do_not_leak():
    t = godlpack.GoTensor(4, 4)
    for _ in range(2000):
        a = np.from_dlpack(t)
        assert godlpack.consume_sum(a)[0] == 120.0
        del a
