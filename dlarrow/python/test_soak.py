"""Leak soak: 100,000 Go -> NumPy rounds and 100,000 pyarrow -> Go ->
NumPy rounds. Python-tracked memory, the process RSS and the Go heap must
come back flat, and nothing may stay exported."""
import gc
import tracemalloc

import numpy as np
import pyarrow as pa

import godlarrow

ROUNDS = 100_000


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def soak(step, rounds=ROUNDS):
    """A leak grows with the rounds, one-time growth does not: the second
    half must add (almost) nothing."""
    for _ in range(rounds // 10):
        step()
    tracemalloc.start()
    marks = []
    for _ in range(2):
        for _ in range(rounds // 2):
            step()
        gc.collect()
        marks.append((tracemalloc.get_traced_memory()[0], rss_kib(), godlarrow.go_heap()))
    tracemalloc.stop()
    (py1, rss1, go1), (py2, rss2, go2) = marks
    assert godlarrow.outstanding() == 0
    assert py2 - py1 < 32 * 1024, f"Python memory grew {py2 - py1} bytes in the second half"
    assert rss2 - rss1 < 4 * 1024, f"RSS grew {rss2 - rss1} KiB in the second half"
    assert go2 - go1 < 256 * 1024, f"Go heap grew {go2 - go1} bytes in the second half"
    print(f"soak: second half: Python {py2 - py1:+d} B, RSS {rss2 - rss1:+d} KiB, Go heap {go2 - go1:+d} B")


def test_soak_go_to_numpy():
    g = godlarrow.GoArrow.arange(16)
    soak(lambda: np.from_dlpack(g).sum())


def test_soak_pyarrow_to_go_to_numpy():
    a = pa.array(np.arange(16.0))
    soak(lambda: np.from_dlpack(godlarrow.GoArrow(a)).sum())
