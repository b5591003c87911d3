"""CUDA tensors of PyTorch, CuPy and JAX imported into Go (an owned
dlpack.Foreign) and handed on to another framework without a copy. Each
case checks the values with the consuming framework on the GPU, the device
pointer at every hop, and that the producer's memory is freed once, after
the last holder let go. Every case skips without CUDA."""
import gc
import sys
import time

import numpy as np
import pytest

import gocuda

N = 1 << 18  # 1 MiB of float32


def torch_sync(torch):
    gc.collect()
    torch.cuda.synchronize()


def gpu_of(jax):
    return next(d for d in jax.devices() if d.platform == "gpu")


def let_go(order, t, drop_consumer, still_held):
    """Drops Go's handle and the consumer's tensor in the given order;
    still_held() must be true in between (the producer's memory is kept
    while either holds it)."""
    if order == "go_first":
        t.close()
    else:
        drop_consumer()
    gc.collect()
    assert still_held(), f"the producer's memory went with the first to let go ({order})"
    if order == "go_first":
        drop_consumer()
    else:
        t.close()
    gc.collect()


def describe(note, gi):
    note(("legacy" if gi["legacy"] else "versioned") + (" writable" if gi["writable"] else " read-only")
         + " capsule from the producer")


@pytest.mark.parametrize("order", ["go_first", "consumer_first"])
def test_torch_go_cupy(torch, cupy, order, note):
    torch_sync(torch)
    base = torch.cuda.memory_allocated()
    x = torch.arange(N, device="cuda", dtype=torch.float32).mul_(3)
    torch_sync(torch)
    held = torch.cuda.memory_allocated()
    assert held - base >= x.nbytes
    ptr = x.data_ptr()

    t = gocuda.go_import(x, assume_writable=True)
    gi = gocuda.info(t)
    describe(note, gi)
    assert gi["device"] == (gocuda.CUDA, 0) and gi["addr"] == ptr == t.data_address
    assert gi["shape"] == (N,) and gi["strides"] == (1,)
    del x  # Go's import holds PyTorch's memory now
    torch_sync(torch)
    assert torch.cuda.memory_allocated() == held

    y = cupy.from_dlpack(t)
    assert y.data.ptr == ptr, "CuPy got a copy"
    assert y.shape == (N,) and y.dtype == cupy.float32
    assert bool(cupy.array_equal(y, cupy.arange(N, dtype=cupy.float32) * 3))

    holder = [y]
    del y
    let_go(order, t, holder.clear, lambda: torch.cuda.memory_allocated() == held)
    torch_sync(torch)
    assert torch.cuda.memory_allocated() == base, "PyTorch's tensor was not freed after both let go"


@pytest.mark.parametrize("order", ["go_first", "consumer_first"])
def test_cupy_go_torch(torch, cupy, order, note):
    pool = cupy.get_default_memory_pool()
    x = cupy.arange(N, dtype=cupy.float32) * 3
    cupy.cuda.Device().synchronize()
    used = pool.used_bytes()
    refs = sys.getrefcount(x)
    ptr = x.data.ptr

    t = gocuda.go_import(x, assume_writable=True)
    gi = gocuda.info(t)
    describe(note, gi)
    assert gi["device"] == (gocuda.CUDA, 0) and gi["addr"] == ptr

    y = torch.from_dlpack(t)
    assert y.data_ptr() == ptr, "PyTorch got a copy"
    assert y.device.type == "cuda" and y.dtype == torch.float32 and tuple(y.shape) == (N,)
    assert torch.equal(y, torch.arange(N, device="cuda", dtype=torch.float32) * 3)

    holder = [y]
    del y
    let_go(order, t, holder.clear, lambda: sys.getrefcount(x) > refs)
    assert sys.getrefcount(x) == refs, "CuPy's array: references left or released twice"
    x = None
    cupy.cuda.Device().synchronize()
    assert pool.used_bytes() <= used - N * 4, "CuPy's memory was not freed"


@pytest.mark.parametrize("order", ["go_first", "consumer_first"])
def test_jax_go_torch(torch, jax, order, note):
    jnp = jax.numpy
    dev = gpu_of(jax)
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), dev) * 3
    x.block_until_ready()
    ptr = x.unsafe_buffer_pointer()

    t = gocuda.go_import(x)
    gi = gocuda.info(t)
    describe(note, gi)
    assert gi["device"][0] == gocuda.CUDA and gi["addr"] == ptr

    stats = dev.memory_stats() or {}
    in_use = stats.get("bytes_in_use")
    del x  # Go's import holds JAX's buffer now
    if in_use is not None:
        assert dev.memory_stats()["bytes_in_use"] == in_use, "JAX freed a buffer Go still holds"

    y = torch.from_dlpack(t)
    assert y.data_ptr() == ptr, "PyTorch got a copy"
    assert torch.equal(y, torch.arange(N, device="cuda", dtype=torch.float32) * 3)

    holder = [y]
    del y
    let_go(order, t, holder.clear, lambda: in_use is None or dev.memory_stats()["bytes_in_use"] == in_use)
    torch_sync(torch)
    if in_use is None:
        note("JAX reports no memory_stats: the buffer's release is not measured")
    else:
        for _ in range(100):  # JAX may free a buffer once its stream is done with it
            if in_use - dev.memory_stats()["bytes_in_use"] >= N * 4:
                break
            time.sleep(0.02)
        assert in_use - dev.memory_stats()["bytes_in_use"] >= N * 4, "JAX's buffer was not freed"


# Layouts: views of a (64, 96) float32 matrix.
LAYOUTS = {
    "strided": lambda b: b[:, ::2],
    "offset": lambda b: b[3:, 5:],
    "transposed": lambda b: b.T,
    "strided_offset_transposed": lambda b: b[1::3, 2::2].T,
    "zero_size": lambda b: b[:0],
    "0-d": lambda b: b[2, 3],
}


def check_layout_in_go(gi, shape, strides_elems, ptr, numel):
    assert gi["device"] == (gocuda.CUDA, 0)
    assert gi["shape"] == tuple(shape)
    if numel:
        assert gi["strides"] == tuple(strides_elems)
        assert gi["addr"] == ptr


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts_torch_go_cupy(torch, cupy, layout, note):
    base = torch.arange(64 * 96, device="cuda", dtype=torch.float32).reshape(64, 96)
    x = LAYOUTS[layout](base)
    t = gocuda.go_import(x, assume_writable=True)
    check_layout_in_go(gocuda.info(t), x.shape, x.stride(), x.data_ptr(), x.numel())

    y = cupy.from_dlpack(t)
    assert y.shape == tuple(x.shape)
    if x.numel():
        assert y.data.ptr == x.data_ptr(), "CuPy got a copy"
        assert y.strides == tuple(s * 4 for s in x.stride())
    else:
        note(f"zero-size: Go hands on address {y.data.ptr:#x}, never dereferenced")
    expect = cupy.asarray(x.cpu().numpy())
    assert bool(cupy.array_equal(y, expect))
    del y, expect
    t.close()


@pytest.mark.parametrize("layout", list(LAYOUTS) + ["negative_stride"])
def test_layouts_cupy_go_torch(torch, cupy, layout, note):
    base = cupy.arange(64 * 96, dtype=cupy.float32).reshape(64, 96)
    x = base[::-1, ::2] if layout == "negative_stride" else LAYOUTS[layout](base)
    t = gocuda.go_import(x, assume_writable=True)
    check_layout_in_go(gocuda.info(t), x.shape, [s // 4 for s in x.strides], x.data.ptr, x.size)
    if layout == "negative_stride":
        # PyTorch has no negative strides: CuPy takes it back instead.
        y = cupy.from_dlpack(t)
        assert y.data.ptr == x.data.ptr and y.strides == x.strides
        assert bool(cupy.array_equal(y, x))
        note("PyTorch has no negative strides: consumed by CuPy")
        del y
        t.close()
        return
    y = torch.from_dlpack(t)
    assert tuple(y.shape) == x.shape
    if x.size:
        assert y.data_ptr() == x.data.ptr, "PyTorch got a copy"
        assert y.stride() == tuple(s // 4 for s in x.strides)
    expect = torch.from_numpy(cupy.asnumpy(x)).cuda()
    assert torch.equal(y, expect)
    del y
    t.close()


def producer_exports(x, note):
    """Whether the producer itself exports x (asked as Go asks: versioned,
    then bare); the capsule is dropped unconsumed."""
    try:
        try:
            c = x.__dlpack__(max_version=(1, 3))
        except TypeError:
            c = x.__dlpack__()
        del c
        return True
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        note(f"the producer refuses to export it: {type(e).__name__}: {e}")
        return False


DTYPE_CODES = {"float16": (2, 16), "bfloat16": (4, 16), "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8)}


@pytest.mark.parametrize("dtype", list(DTYPE_CODES))
def test_reduced_precision_torch(torch, dtype, note):
    if not hasattr(torch, dtype):
        pytest.skip(f"PyTorch {torch.__version__} has no {dtype}")
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(4096, device="cuda", generator=gen).to(getattr(torch, dtype))
    if not producer_exports(x, note):
        pytest.skip(f"PyTorch {torch.__version__} does not export {dtype} through DLPack")
    t = gocuda.go_import(x, assume_writable=True)
    gi = gocuda.info(t)
    assert gi["dtype"][:2] == DTYPE_CODES[dtype] and gi["addr"] == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.dtype == x.dtype and y.data_ptr() == x.data_ptr()
    assert torch.equal(y.view(torch.uint8), x.view(torch.uint8))
    del y
    t.close()


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_reduced_precision_jax(torch, jax, dtype, note):
    jnp = jax.numpy
    if not hasattr(jnp, dtype) or not hasattr(torch, dtype):
        pytest.skip(f"no {dtype} in JAX or PyTorch")
    vals = np.random.default_rng(7).standard_normal(4096).astype(np.float32)
    x = jax.device_put(jnp.asarray(vals).astype(getattr(jnp, dtype)), gpu_of(jax))
    x.block_until_ready()
    if not producer_exports(x, note):
        pytest.skip(f"JAX {jax.__version__} does not export {dtype} through DLPack")
    t = gocuda.go_import(x)
    gi = gocuda.info(t)
    assert gi["dtype"][:2] == DTYPE_CODES[dtype] and gi["addr"] == x.unsafe_buffer_pointer()
    y = torch.from_dlpack(t)
    assert y.dtype == getattr(torch, dtype) and y.data_ptr() == x.unsafe_buffer_pointer()
    bits = torch.from_numpy(np.asarray(x).view(np.uint8).copy()).cuda()
    assert torch.equal(y.view(torch.uint8), bits)
    del y
    t.close()


def test_jax_read_only_stays_read_only(torch, jax, note):
    jnp = jax.numpy
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), gpu_of(jax))
    x.block_until_ready()
    ptr = x.unsafe_buffer_pointer()
    own = x.__dlpack__(max_version=(1, 3))  # what JAX itself hands out
    versioned = gocuda.capsule_name(own) == "dltensor_versioned"
    jax_read_only = not versioned or bool(gocuda.capsule_flags(own) & gocuda.FLAG_READ_ONLY)
    del own
    if not jax_read_only:
        pytest.skip(f"JAX {jax.__version__} hands its arrays out as writable versioned tensors: nothing says read-only")
    t = gocuda.go_import(x)  # no AssumeWritable: a legacy tensor is read-only
    gi = gocuda.info(t)
    describe(note, gi)
    assert not gi["writable"], "Go's import of a JAX array is writable"

    cap = t.__dlpack__(max_version=(1, 3))  # a versioned consumer: shared, flagged
    assert gocuda.capsule_flags(cap) & gocuda.FLAG_READ_ONLY
    del cap  # unconsumed: its destructor releases it
    with pytest.raises(BufferError, match="request"):
        t.__dlpack__()  # legacy: cannot carry the flag; Go copies no device memory
    with pytest.raises(BufferError, match="request"):
        t.__dlpack__(max_version=(1, 3), copy=True)

    y = torch.from_dlpack(t)  # PyTorch asks for a versioned tensor
    assert y.data_ptr() == ptr
    assert torch.equal(y, torch.arange(N, device="cuda", dtype=torch.float32))
    del y
    t.close()


def test_cpu_view_of_device_memory_refused(torch, cupy):
    sources = [torch.ones(16, device="cuda"), cupy.ones(16, dtype=cupy.float32)]
    for x in sources:
        for allow in (False, True):
            t = gocuda.go_import(x, allow_host_memory=allow, assume_writable=True)
            with pytest.raises(gocuda.GoError) as e:
                gocuda.cpu_sum(t)
            assert e.value.sentinel == "ErrDevice", e.value
            t.close()


def _managed(cupy, n):
    mem = cupy.cuda.malloc_managed(n * 4)
    return cupy.ndarray((n,), dtype=cupy.float32, memptr=mem)


def _pinned(cupy, n):
    pm = cupy.cuda.alloc_pinned_memory(n * 4)
    um = cupy.cuda.UnownedMemory(pm.ptr, n * 4, pm, device_id=cupy.cuda.Device().id)
    return cupy.ndarray((n,), dtype=cupy.float32, memptr=cupy.cuda.MemoryPointer(um, 0))


@pytest.mark.parametrize("memory", ["managed", "pinned"])
def test_allow_host_memory(torch, cupy, memory, note):
    n = 4096
    x = (_managed if memory == "managed" else _pinned)(cupy, n)
    x[...] = cupy.arange(n, dtype=cupy.float32) * 3  # written by a CuPy kernel
    cupy.cuda.Device().synchronize()
    want = 3 * n * (n - 1) / 2
    try:
        dev = tuple(x.__dlpack_device__())
    except Exception as e:
        pytest.skip(f"CuPy {cupy.__version__} does not export {memory} memory: {type(e).__name__}: {e}")
    if not producer_exports(x, note):
        pytest.skip(f"CuPy {cupy.__version__} does not export {memory} memory through DLPack")
    note(f"CuPy exports it as device type {int(dev[0])}")

    t = gocuda.go_import(x, allow_host_memory=True, assume_writable=True)
    gi = gocuda.info(t)
    assert gi["device"][0] == int(dev[0]) and gi["addr"] == x.data.ptr
    plain = gocuda.go_import(x, assume_writable=True)
    with pytest.raises(gocuda.GoError) as e:
        gocuda.cpu_sum(plain)
    assert e.value.sentinel == "ErrDevice"
    if int(dev[0]) in (gocuda.CUDA_HOST, gocuda.CUDA_MANAGED):
        assert gocuda.cpu_sum(t) == want  # read by Go on the CPU
    else:
        # The producer calls it device memory: no CPU view, whatever the option.
        with pytest.raises(gocuda.GoError) as e:
            gocuda.cpu_sum(t)
        assert e.value.sentinel == "ErrDevice"
        note("so Go refuses the CPU view (ErrDevice) even with AllowHostMemory")
    t.close()
    plain.close()
