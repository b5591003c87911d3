"""The DLPack 1.3 C exchange API on the GPU: PyTorch publishes
__dlpack_c_exchange_api__ on its tensor type. Go imports CUDA tensors
through that table (managed_tensor_from_py_object_no_sync) and asks its
current_work_stream, side by side with the __dlpack__ path; the cost of
both paths is a figure of one run. The table synchronises nothing: the
consumer orders its stream after the one current_work_stream reports."""
import gc
import time

import pytest

import gocuda

N = 1 << 16
ROUNDS = 20_000


def per_call_us(fn, rounds=ROUNDS):
    for _ in range(1000):
        fn()
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def table_or_skip(torch, x):
    if gocuda.exchange_table(x) is None:
        pytest.skip(f"PyTorch {torch.__version__} publishes no __dlpack_c_exchange_api__")


def test_exchange_api_torch(torch, note):
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    table_or_skip(torch, x)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()

    # A tensor through the table: the same memory, values by PyTorch, and
    # PyTorch's memory freed once both Go and the consumer let go.
    y0 = torch.arange(N, device="cuda", dtype=torch.float32).mul_(5)
    ptr = y0.data_ptr()
    t = gocuda.go_import_table(y0, assume_writable=True)
    gi = gocuda.info(t)
    note(("writable" if gi["writable"] else "read-only") + f" tensor, DLPack {'legacy' if gi['legacy'] else 'versioned'}")
    assert gi["device"] == (gocuda.CUDA, 0) and gi["addr"] == ptr and gi["shape"] == (N,)
    del y0
    z = torch.from_dlpack(t)
    assert z.data_ptr() == ptr
    assert torch.equal(z, torch.arange(N, device="cuda", dtype=torch.float32) * 5)
    t.close()
    del z
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == base, "PyTorch's tensor was not freed"

    # current_work_stream, asked by Go, is PyTorch's current stream.
    side = torch.cuda.Stream()
    default = gocuda.work_stream(x, (gocuda.CUDA, 0))
    assert default == torch.cuda.current_stream().cuda_stream
    with torch.cuda.stream(side):
        assert gocuda.work_stream(x, (gocuda.CUDA, 0)) == side.cuda_stream
    note(f"current_work_stream: {default:#x} by default, the side stream inside torch.cuda.stream")

    def via_table():
        gocuda.go_import_table(x, assume_writable=True).close()

    def via_dlpack():
        gocuda.go_import(x.__dlpack__(max_version=(1, 3)), assume_writable=True, forward_stream=False).close()

    def stream_query():
        gocuda.work_stream(x, (gocuda.CUDA, 0))

    table_us, dlpack_us, stream_us = per_call_us(via_table), per_call_us(via_dlpack), per_call_us(stream_query)
    gocuda.FIGURES["PyTorch CUDA tensor into Go and closed, through the exchange table"] = f"{table_us:.2f} µs each ({ROUNDS:,} rounds)"
    gocuda.FIGURES["PyTorch CUDA tensor into Go and closed, through __dlpack__ (capsule)"] = f"{dlpack_us:.2f} µs each ({ROUNDS:,} rounds)"
    gocuda.FIGURES["current_work_stream asked from Go"] = f"{stream_us:.2f} µs each ({ROUNDS:,} rounds)"
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == base, "memory left after the timed rounds"
