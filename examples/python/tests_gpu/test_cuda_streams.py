"""Streams through Go. A producer writes a large tensor on a side stream
behind a delay kernel; Go imports it and hands it on; a consumer reads it
at once on another (non-blocking) stream. The consumer's
__dlpack__(stream=s) must reach the producer, which then orders its
pending work before s: Go's re-export keeps the producer object
(gocuda.go_import(..., forward_stream=True)) and asks it again with s.

The same rounds without forwarding are run for comparison: then only the
import itself was synchronised (stream=None: the legacy default stream,
which a non-blocking stream does not wait for; nothing at all through an
exchange table), and the rounds that read values not yet written are
counted as a figure, not asserted (a race shows up or not)."""
import gc

import pytest

import gocuda

ROUNDS = 1000
N = 1 << 24  # 64 MiB of float32
SPIN = 2_000_000  # cycles of the delay kernel (about 1 ms)

SPIN_SRC = r'''
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
'''


def torch_to_cupy(torch, cupy, forward):
    """PyTorch writes on prod, CuPy reads on cons; returns the rounds with
    wrong values."""
    prod = torch.cuda.Stream()
    cons = cupy.cuda.Stream(non_blocking=True)
    wrong = 0
    with torch.cuda.stream(prod):
        for r in range(ROUNDS):
            torch.cuda._sleep(SPIN)
            x = torch.full((N,), float(r), device="cuda")
            t = gocuda.go_import(x, assume_writable=True, forward_stream=forward)
            with cons:
                y = cupy.from_dlpack(t)  # asks with stream=cons.ptr
                bad = int(cupy.count_nonzero(y != r))
            if forward:
                assert gocuda.stats()["last_stream"] == cons.ptr
            del y
            t.close()
            prod.synchronize()  # the write is done before its memory is reused
            del x
            wrong += bad != 0
    return wrong


def cupy_to_torch(torch, cupy, forward):
    """CuPy writes on prod, PyTorch reads on cons; returns the rounds with
    wrong values."""
    spin = cupy.RawKernel(SPIN_SRC, "spin")
    prod = cupy.cuda.Stream(non_blocking=True)
    cons = torch.cuda.Stream()
    wrong = 0
    with prod:
        for r in range(ROUNDS):
            spin((1,), (1,), (cupy.int64(SPIN),))
            x = cupy.full((N,), r, dtype=cupy.float32)
            t = gocuda.go_import(x, assume_writable=True, forward_stream=forward)
            with torch.cuda.stream(cons):
                y = torch.from_dlpack(t)  # asks with stream=cons.cuda_stream
                bad = int((y != r).sum().item())
            if forward:
                assert gocuda.stats()["last_stream"] == cons.cuda_stream
            del y
            t.close()
            prod.synchronize()
            del x
            wrong += bad != 0
    return wrong


@pytest.mark.parametrize("chain", ["torch_to_cupy", "cupy_to_torch"])
def test_stream_forwarded(torch, cupy, chain, note):
    if chain == "torch_to_cupy" and not hasattr(torch.cuda, "_sleep"):
        pytest.skip(f"PyTorch {torch.__version__} has no torch.cuda._sleep for the delay")
    run = torch_to_cupy if chain == "torch_to_cupy" else cupy_to_torch
    syncs = gocuda.stats()["stream_syncs"]
    wrong = run(torch, cupy, forward=True)
    gc.collect()
    assert gocuda.stats()["stream_syncs"] - syncs == ROUNDS, "a consumer's stream did not reach the producer"
    unforwarded = run(torch, cupy, forward=False)
    gocuda.FIGURES[f"streams, {chain}: rounds with wrong values of {ROUNDS}"] = (
        f"{wrong} with the stream passed on to the producer; {unforwarded} without (the import's own synchronisation only)")
    note(f"without forwarding: {unforwarded} of {ROUNDS} rounds read unwritten values")
    assert wrong == 0, f"{wrong} of {ROUNDS} rounds read values the producer had not written yet"
