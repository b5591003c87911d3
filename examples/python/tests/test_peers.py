"""Go <-> the real peers, every dtype each supports, both directions, data
compared bit for bit: NumPy, JAX (CPU, x64 on), pyarrow, pydlpack. Each
test ends with nothing outstanding (the fixture in test_numpy.py is
repeated here)."""
import gc

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pyarrow as pa
import pytest

import dlpack as pydlpack
import godlpack

jax.config.update("jax_enable_x64", True)

# numpy dtype -> DLPack (code, bits)
DTYPES = {
    np.bool_: (6, 8), np.int8: (0, 8), np.int16: (0, 16), np.int32: (0, 32), np.int64: (0, 64),
    np.uint8: (1, 8), np.uint16: (1, 16), np.uint32: (1, 32), np.uint64: (1, 64),
    np.float16: (2, 16), np.float32: (2, 32), np.float64: (2, 64),
    np.complex64: (5, 64), np.complex128: (5, 128),
}


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlpack.outstanding() == 0


def sample(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    x = np.asarray(np.arange(n).reshape(shape) * 7 - 3)
    if dtype is np.bool_:
        return np.asarray((x % 3 == 0).astype(np.bool_))
    if np.issubdtype(dtype, np.complexfloating):
        return np.asarray((x + 0.5j * x).astype(dtype))
    if np.issubdtype(dtype, np.floating):
        return np.asarray((x / 4).astype(dtype))
    return np.asarray(x.astype(dtype))


def go_tensor(x, readonly=False):
    code, bits = DTYPES.get(x.dtype.type) or (4, 16)  # bfloat16
    return godlpack.GoTensor.from_bytes(code, bits, list(x.shape), np.ascontiguousarray(x).tobytes(), readonly)


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: np.dtype(d).name)
def test_numpy_both_ways_every_dtype(dtype):
    x = sample(dtype, (3, 4))
    t = go_tensor(x)
    a = np.from_dlpack(t)
    assert a.dtype == x.dtype and a.tobytes() == x.tobytes()
    assert a.ctypes.data == t.data_address, "zero copy"
    del a
    for view in (x, x.T, x[::-1, ::2], np.broadcast_to(x[0], (2, 4))):
        code, bits, raw = godlpack.copy_out(view, view.nbytes + 64)
        assert (code, bits) == DTYPES[dtype]
        assert raw == np.ascontiguousarray(view).tobytes()
        assert godlpack.consume_sum(view)[0] == reference_sum(view)


def reference_sum(x):
    """The sum Go's consumer computes: complex for complex types, float64
    otherwise (the samples are small, so every order of summation agrees)."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        return complex(x.astype(np.complex128).sum())
    return float(x.astype(np.float64).sum())


@pytest.mark.parametrize("dtype", list(DTYPES) + [ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_from_bytes_refuses_partial_elements(dtype):
    x = sample(dtype, (2, 3))
    code, bits = DTYPES.get(x.dtype.type) or (4, 16)
    raw = x.tobytes()
    if x.itemsize > 1:
        with pytest.raises(ValueError, match="nbytes"):
            godlpack.GoTensor.from_bytes(code, bits, [2, 3], raw + b"\0")  # a trailing partial element
    with pytest.raises(ValueError, match="nbytes"):
        godlpack.GoTensor.from_bytes(code, bits, [2, 3], raw[:-x.itemsize])  # one element short
    with pytest.raises(ValueError, match="nbytes"):
        godlpack.GoTensor.from_bytes(code, bits, [7], raw)  # the shape does not match
    with pytest.raises(ValueError, match="negative"):
        godlpack.GoTensor.from_bytes(code, bits, [-2, -3], raw)
    t = godlpack.GoTensor.from_bytes(code, bits, [2, 3], raw)
    assert godlpack.copy_out(t, len(raw))[2] == raw
    assert godlpack.live() >= 1


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 1, 3, 1), (1, 2, 1, 2, 1, 2, 1, 2),
                                   (0,), (0, 3), (3, 0), (2, 0, 4)], ids=str)
def test_shapes_both_ways(shape):
    x = sample(np.float32, shape)
    t = go_tensor(x)
    a = np.from_dlpack(t)
    assert a.shape == shape and a.tobytes() == x.tobytes()
    del a
    _, _, raw = godlpack.copy_out(x, x.nbytes + 8)
    assert raw == x.tobytes()


def test_numpy_byte_offset_and_views():
    base = np.arange(40.0).reshape(5, 8)
    for view in (base[2:, 3:], base[1::2, ::-3], base[:, 5], base.T[2:4]):
        _, _, raw = godlpack.copy_out(view, view.nbytes)
        assert raw == np.ascontiguousarray(view).tobytes()


def test_numpy_refuses_bfloat16_and_releases_it():
    x = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    t = go_tensor(x)
    # NumPy has no bfloat16 (BufferError in newer releases, RuntimeError in
    # 2.4); the capsule it refused is released (the fixture checks).
    with pytest.raises((BufferError, RuntimeError), match="dtype"):
        np.from_dlpack(t)


JAX_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", JAX_DTYPES, ids=lambda d: np.dtype(d).name)
def test_jax_both_ways(dtype):
    x = sample(dtype, (4, 3))
    t = go_tensor(x)
    j = jnp.from_dlpack(t)  # JAX asks for a legacy capsule
    assert np.asarray(j).tobytes() == x.tobytes()
    del j
    y = jnp.asarray(x)
    code, bits, raw = godlpack.copy_out(y, x.nbytes)
    assert (code, bits) == DTYPES[dtype]
    assert raw == x.tobytes()
    total, versioned, read_only, _ = godlpack.consume_sum(y)  # JAX answers with a legacy capsule
    assert total == reference_sum(x) and not versioned and read_only
    del y


def test_jax_bfloat16_both_ways():
    x = np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16)
    j = jnp.from_dlpack(go_tensor(x))
    assert j.dtype == jnp.bfloat16 and np.asarray(j).tobytes() == x.tobytes()
    del j
    code, bits, raw = godlpack.copy_out(jnp.asarray(x), x.nbytes)
    assert (code, bits, raw) == (4, 16, x.tobytes())
    assert godlpack.consume_sum(jnp.asarray(x))[0] == reference_sum(x.astype(np.float32))


@pytest.mark.parametrize("typ", [pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.uint64(), pa.float32(), pa.float64()],
                         ids=str)
def test_go_reads_pyarrow(typ):
    arr = pa.array(list(range(10)), type=typ)
    sliced = arr.slice(3, 5)  # the offset is folded into the data pointer
    want = np.asarray(sliced)
    _, _, raw = godlpack.copy_out(sliced, want.nbytes)
    assert raw == want.tobytes()


def test_pyarrow_refusals_are_clean():
    with pytest.raises(TypeError):
        pa.array([1, None, 3]).__dlpack__(max_version=(1, 0))  # nulls: pyarrow refuses, nothing reaches Go
    empty = pa.array([], type=pa.float64())
    assert godlpack.copy_out(empty, 8)[2] == b""


# pydlpack 0.2.1 is tested in its legacy mode only. With
# impl_cls=DLManagedTensorVersioned its __dlpack__ rejects max_version and
# returns a capsule named "dltensor" that holds a DLManagedTensorVersioned:
# a consumer must trust the name, so it reads the wrong layout (NumPy 2.4.6
# fails on it with SystemError; a deleter read from the wrong offset can
# crash). That is a peer bug no validator can catch.
def test_pydlpack_both_ways():
    x = sample(np.int32, (3, 5))
    _, _, raw = godlpack.copy_out(pydlpack.asdlpack(x, impl_cls=pydlpack.DLManagedTensor), x.nbytes)
    assert raw == x.tobytes()
    t = go_tensor(x)
    wrapped = pydlpack.asdlpack(t, impl_cls=pydlpack.DLManagedTensor)
    a = np.from_dlpack(wrapped)
    assert a.tobytes() == x.tobytes()
    del a, wrapped


def test_go_owner_dropped_before_jax_array():
    x = sample(np.float32, (2, 2))
    t = go_tensor(x)
    j = jnp.from_dlpack(t)
    del t
    gc.collect()
    assert np.asarray(j).tobytes() == x.tobytes()
    del j


@pytest.mark.parametrize("n", [1, 3, 5, 7, 17, 33, 100, 1000])
def test_jax_shares_go_memory_of_every_size(n):
    """Go tensors live in 256-byte aligned memory, so JAX shares them
    (JAX copies memory that is not 64-byte aligned) and copy=False
    succeeds whatever the size."""
    x = sample(np.float32, (n,))
    t = go_tensor(x)
    j = jnp.from_dlpack(t, copy=False)
    assert j.unsafe_buffer_pointer() == t.data_address, "zero copy"
    assert np.asarray(j).tobytes() == x.tobytes()
    del j


def test_jax_takes_read_only_go_memory_as_a_copy():
    """JAX asks for legacy capsules only, which cannot say read-only: the
    producer answers with a copy JAX owns instead of refusing."""
    x = sample(np.float64, (3, 5))
    t = go_tensor(x, readonly=True)
    j = jnp.from_dlpack(t)
    assert np.asarray(j).tobytes() == x.tobytes()
    assert j.unsafe_buffer_pointer() != t.data_address, "a copy, not the read-only memory"
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)  # a legacy request that forbids the copy
    del j
