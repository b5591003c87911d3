"""Leak soak: 100,000 round trips per peer direction. Python-tracked
memory (tracemalloc), the process RSS and Go's outstanding-export counter
and the Go heap must come back flat. Deleters from threads Python
creates."""
import gc
import sys
import threading
import time
import tracemalloc

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest

import dlpack as pydlpack
import godlpack

ROUNDS = 100_000


def rss_kib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4


def soak(step, rounds=ROUNDS):
    """Runs step rounds times. A leak grows with the rounds, one-time
    growth (caches, pools, allocator arenas) does not: the second half of
    the run must add (almost) nothing to Python memory or RSS."""
    for _ in range(rounds // 10):  # JAX in particular keeps growing caches for a while
        step()
    tracemalloc.start()
    marks = []
    for half in range(2):
        for _ in range(rounds // 2):
            step()
        gc.collect()
        marks.append((tracemalloc.get_traced_memory()[0], rss_kib(), godlpack.go_heap()))
    tracemalloc.stop()
    (py1, rss1, go1), (py2, rss2, go2) = marks
    assert godlpack.outstanding() == 0
    assert py2 - py1 < 32 * 1024, f"Python memory grew {py2 - py1} bytes in the second half"
    assert rss2 - rss1 < 4 * 1024, f"RSS grew {rss2 - rss1} KiB in the second half"
    assert go2 - go1 < 256 * 1024, f"Go heap grew {go2 - go1} bytes in the second half"
    print(f"soak: second half: Python {py2 - py1:+d} B, RSS {rss2 - rss1:+d} KiB, Go heap {go2 - go1:+d} B")


def test_soak_go_to_numpy():
    t = godlpack.GoTensor(4, 4)
    soak(lambda: np.from_dlpack(t).sum())


def test_soak_numpy_to_go():
    x = np.arange(16.0).reshape(4, 4)
    soak(lambda: godlpack.consume_sum(x))


def test_soak_go_to_jax():
    t = godlpack.GoTensor(4, 4)
    soak(lambda: jnp.from_dlpack(t).block_until_ready())


def test_soak_jax_to_go():
    y = jnp.arange(16.0)
    soak(lambda: godlpack.consume_sum(y))


def test_soak_pyarrow_to_go():
    a = pa.array(np.arange(16.0))
    soak(lambda: godlpack.consume_sum(a))


def test_soak_pydlpack_to_go():
    x = np.arange(16.0)
    soak(lambda: godlpack.consume_sum(pydlpack.asdlpack(x, impl_cls=pydlpack.DLManagedTensor)))


def test_soak_go_to_pydlpack():
    t = godlpack.GoTensor(4, 4)
    soak(lambda: np.from_dlpack(pydlpack.asdlpack(t, impl_cls=pydlpack.DLManagedTensor)).sum())


def test_soak_unconsumed_capsules():
    t = godlpack.GoTensor(2, 2)
    soak(lambda: t.__dlpack__(max_version=(1, 3)))


class Counted(np.ndarray):
    """A NumPy array that counts its deaths."""
    deaths = 0

    def __del__(self):
        Counted.deaths += 1


def test_soak_numpy_go_jax_reexport():
    """NumPy -> Go (an owned Foreign) -> JAX, zero copy, 100,000 times; the
    Go owner lets go first in odd rounds, JAX first in even ones. Each
    round's NumPy array is a fresh view that NumPy's capsule keeps alive
    until its deleter runs, and that counts its death: the producer's
    deleter ran exactly once per round, and the base array's reference
    count is back where it was."""
    base = np.zeros(16 + 16, np.float32)  # float32: JAX keeps it with or without x64
    off = (-base.ctypes.data % 64) // 4
    base = base[off:off + 16]
    base[:] = np.arange(16.0)
    before = sys.getrefcount(base)
    Counted.deaths = 0
    rounds = [0]

    def step():
        v = base.view(Counted)
        t = godlpack.GoTensor.from_dlpack(v)
        del v
        j = jnp.from_dlpack(t)
        if rounds[0] % 1000 == 0:
            assert j.unsafe_buffer_pointer() == base.ctypes.data, "zero copy"
        if rounds[0] % 2:
            t.close()
            j.block_until_ready()
            del j
        else:
            j.block_until_ready()
            del j
            t.close()
        rounds[0] += 1

    soak(step)
    deadline = time.monotonic() + 5
    while Counted.deaths != rounds[0] and time.monotonic() < deadline:  # JAX may free on its own thread
        gc.collect()
        time.sleep(0.01)
    assert Counted.deaths == rounds[0] == ROUNDS + ROUNDS // 10
    assert sys.getrefcount(base) == before
    assert godlpack.live() == 0
    print(f"soak: {rounds[0]} re-export rounds, NumPy deleters {Counted.deaths}")


@pytest.mark.parametrize("what", ["array", "capsule"])
def test_deleters_on_python_threads(what):
    """Arrays and unconsumed capsules released on threads Python created,
    each of which exits right after: Go's release runs there."""
    t = godlpack.GoTensor(8, 8)
    holders = [np.from_dlpack(t) if what == "array" else t.__dlpack__(max_version=(1, 3)) for _ in range(400)]
    assert godlpack.outstanding() == 400

    def drop(items):
        items.clear()  # the last references die on this thread

    threads = [threading.Thread(target=drop, args=(holders[i::8],)) for i in range(8)]
    del holders
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    gc.collect()
    assert godlpack.outstanding() == 0
