"""The DLPack 1.3 C exchange API against __dlpack__, side by side in one
process, for the same objects: each exchange is timed through the type's
__dlpack_c_exchange_api__ table and, with the attribute hidden, through
__dlpack__. Prints Markdown rows (ns per exchange, median of interleaved
batches) and fails if Python objects or Go exports were left behind.

Run by bench/compare.sh (make compare) with GODLPACK_LIB naming the
c-shared library and examples/python on PYTHONPATH; needs NumPy and tvm-ffi."""
import gc
import statistics
import sys
import time

import numpy as np
import tvm_ffi
from tvm_ffi import core as tvm_core

import godlpack

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BATCHES = 7


class Wrapper(tvm_core.DLTensorTestWrapper):
    """tvm-ffi's table-publishing test type; a subclass so that the table
    can be hidden (set to None) and shown again on this type alone."""


def hide_go(on):
    if on:
        godlpack.GoTensor.__dlpack_c_exchange_api__ = api
    else:
        del godlpack.GoTensor.__dlpack_c_exchange_api__


def hide_tvm(on):
    if on:
        if "__dlpack_c_exchange_api__" in vars(Wrapper):
            del Wrapper.__dlpack_c_exchange_api__
    else:
        Wrapper.__dlpack_c_exchange_api__ = None  # not a capsule: consumers fall back


api = godlpack.GoTensor.__dlpack_c_exchange_api__
go = [godlpack.GoTensor(2, 3) for _ in range(8)]
tvm = [Wrapper(tvm_ffi.from_dlpack(np.arange(6.0).reshape(2, 3))) for _ in range(8)]


def go_to_tvm(objs):
    for o in objs:
        tvm_ffi.from_dlpack(o)


def into_go(objs):
    for o in objs:
        godlpack.consume_sum(o)


CASES = [
    ("Go → tvm-ffi: `tvm_ffi.from_dlpack(GoTensor)`, tensor dropped", go, go_to_tvm, hide_go, "from_py", None),
    ("tvm-ffi → Go: Go takes a tvm-ffi tensor (DLTensorTestWrapper), sums 6 elements, releases", tvm, into_go,
     hide_tvm, "table_imports", "protocol_imports"),
    ("Go → Go: Go takes a GoTensor from Python, sums 6 elements, releases", go, into_go, hide_go,
     "table_imports", "protocol_imports"),
]


def per_op(objs, fn):
    rounds = max(1, N // len(objs))
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        fn(objs)
    return (time.perf_counter_ns() - t0) / (rounds * len(objs))


def measure(objs, fn, toggle, table_stat, proto_stat):
    fn(objs)  # warm up both paths
    toggle(False)
    fn(objs)
    toggle(True)
    table, proto = [], []
    for _ in range(BATCHES):
        s0 = godlpack.exchange_stats()
        table.append(per_op(objs, fn))
        s1 = godlpack.exchange_stats()
        toggle(False)
        try:
            proto.append(per_op(objs, fn))
        finally:
            toggle(True)
        s2 = godlpack.exchange_stats()
        # Each path must have been the one taken, every time.
        assert s1[table_stat] - s0[table_stat] >= max(1, N // len(objs)) * len(objs), "table path not taken"
        assert s2[table_stat] == s1[table_stat], "table used while hidden"
        if proto_stat:
            assert s2[proto_stat] - s1[proto_stat] >= max(1, N // len(objs)) * len(objs)
    return statistics.median(table), statistics.median(proto)


def main():
    gc.collect()
    objects = len(gc.get_objects())
    refs = [sys.getrefcount(o) for o in go + tvm]
    live = godlpack.live()
    rows = [(name, *measure(objs, fn, toggle, ts, ps)) for name, objs, fn, toggle, ts, ps in CASES]
    gc.collect()
    leaked = len(gc.get_objects()) - objects
    assert [sys.getrefcount(o) for o in go + tvm] == refs, "reference counts of the exchanged objects changed"
    assert godlpack.live() == live and godlpack.outstanding() == 0, "Go tensors left behind"
    assert leaked <= 0, f"{leaked} Python objects left behind"
    print("| exchange (same objects, one process) | through the table, ns | through `__dlpack__`, ns | speed-up |")
    print("|---|---|---|---|")
    for name, t, p in rows:
        print(f"| {name} | {t:.0f} | {p:.0f} | {p / t:.1f}× |")
    print(f"\n{N} exchanges per batch, median of {BATCHES} interleaved batches per path; "
          f"Python objects left behind: {max(leaked, 0)}; Go exports outstanding: {godlpack.outstanding()}; "
          f"tvm-ffi {tvm_ffi.__version__}, NumPy {np.__version__}, CPython {sys.version.split()[0]}.")


if __name__ == "__main__":
    main()
