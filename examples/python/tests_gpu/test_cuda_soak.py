"""Soak on the device: 100,000 CUDA round trips through Go (a fresh tensor
each round, imported into Go and handed back), the framework's GPU memory
flat, Go's heap flat, nothing outstanding. The rate is a figure."""
import gc
import time

import godlpack
import gocuda

ROUNDS = 100_000
WARMUP = 1_000


def soak(one, settle, measure):
    for i in range(WARMUP):
        one(i, check=False)
    settle()
    mem0, heap0, s0 = measure(), godlpack.go_heap(), gocuda.stats()
    start = time.perf_counter()
    for i in range(ROUNDS):
        one(i, check=i % 1000 == 0)
    secs = time.perf_counter() - start
    settle()
    mem1, heap1, s1 = measure(), godlpack.go_heap(), gocuda.stats()
    return mem0, mem1, heap1 - heap0, s0, s1, secs


def test_soak_torch_go_torch(torch):
    def one(i, check):
        x = torch.full((256,), float(i % 1000), device="cuda")
        t = gocuda.go_import(x, assume_writable=True)
        y = torch.from_dlpack(t)
        assert y.data_ptr() == x.data_ptr()
        t.close()
        del x
        if check:
            assert bool((y == i % 1000).all())

    def settle():
        gc.collect()
        torch.cuda.synchronize()

    mem0, mem1, heap, s0, s1, secs = soak(one, settle, torch.cuda.memory_allocated)
    gocuda.FIGURES["soak PyTorch → Go → PyTorch"] = (
        f"{ROUNDS:,} round trips in {secs:.1f} s ({secs / ROUNDS * 1e6:.1f} µs each); "
        f"torch.cuda.memory_allocated {mem0:,} → {mem1:,} bytes; Go heap {heap:+,} bytes")
    assert mem1 == mem0, "PyTorch's GPU memory grew"
    assert s1["outstanding"] == 0 and godlpack.live() == 0
    assert s1["leaked_imports"] == s0["leaked_imports"] and s1["bad_releases"] == s0["bad_releases"]
    assert heap < 1 << 20, f"Go heap grew by {heap} bytes"


def test_soak_cupy_go_cupy(cupy, torch):
    pool = cupy.get_default_memory_pool()

    def one(i, check):
        x = cupy.full((256,), i % 1000, dtype=cupy.float32)
        t = gocuda.go_import(x, assume_writable=True)
        y = cupy.from_dlpack(t)
        assert y.data.ptr == x.data.ptr
        t.close()
        del x
        if check:
            assert bool((y == i % 1000).all())

    def settle():
        gc.collect()
        cupy.cuda.Device().synchronize()

    mem0, mem1, heap, s0, s1, secs = soak(one, settle, pool.used_bytes)
    gocuda.FIGURES["soak CuPy → Go → CuPy"] = (
        f"{ROUNDS:,} round trips in {secs:.1f} s ({secs / ROUNDS * 1e6:.1f} µs each); "
        f"CuPy pool in use {mem0:,} → {mem1:,} bytes; Go heap {heap:+,} bytes")
    assert mem1 == mem0, "CuPy's GPU memory grew"
    assert s1["outstanding"] == 0 and godlpack.live() == 0
    assert s1["leaked_imports"] == s0["leaked_imports"] and s1["bad_releases"] == s0["bad_releases"]
    assert heap < 1 << 20, f"Go heap grew by {heap} bytes"
