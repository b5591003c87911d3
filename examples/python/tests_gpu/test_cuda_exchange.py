"""The DLPack 1.3 C exchange API on the GPU: PyTorch publishes
__dlpack_c_exchange_api__ on its tensor type. Go imports CUDA tensors
through __dlpack__ (gocuda.go_import) and, where this build of libgodlpack
has a consumer of other types' tables, through PyTorch's table, asking its
current_work_stream; the import rate of both paths is a figure of one run.
Without such a consumer the table half is skipped, saying so."""
import time

import pytest

import gocuda

ROUNDS = 20_000


def rate(fn, rounds=ROUNDS):
    for i in range(min(rounds, 1000)):
        fn()
    start = time.perf_counter()
    for i in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def test_exchange_api_torch(torch, note):
    x = torch.arange(1024, device="cuda", dtype=torch.float32)

    def via_protocol():
        t = gocuda.go_import(x, assume_writable=True, forward_stream=False)
        t.close()

    us = rate(via_protocol)
    gocuda.FIGURES["PyTorch CUDA → Go import + close, through __dlpack__"] = f"{us:.2f} µs each ({ROUNDS:,} rounds)"
    if getattr(type(x), "__dlpack_c_exchange_api__", None) is None:
        pytest.skip(f"PyTorch {torch.__version__} publishes no __dlpack_c_exchange_api__")
    if not hasattr(gocuda, "go_import_table"):
        pytest.skip("this libgodlpack has no consumer of other types' __dlpack_c_exchange_api__ "
                    "(Go imports through __dlpack__ only)")
    t = gocuda.go_import_table(x)
    gi = gocuda.info(t)
    assert gi["device"] == (gocuda.CUDA, 0) and gi["addr"] == x.data_ptr()
    t.close()
