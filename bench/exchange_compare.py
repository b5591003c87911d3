"""The DLPack 1.3 C exchange API against __dlpack__, side by side in one
process, for the same objects: each exchange is timed through the type's
__dlpack_c_exchange_api__ table and, with the attribute hidden, through
__dlpack__. Prints Markdown rows (ns per exchange, median of interleaved
batches) and fails if Python objects or Go exports were left behind.

Run by bench/compare.sh (make compare) with GODLPACK_LIB naming the
c-shared library and examples/python on PYTHONPATH; needs NumPy and tvm-ffi."""
import ctypes
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

# A copy of GoTensor's table on a subclass: not the library's own table,
# so Go calls its C entries as it would any other library's, the
# managed one (take_many) or the DLTensor one (view_many).
_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_new = ctypes.pythonapi.PyCapsule_New
_new.restype, _new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
table_copy = ctypes.create_string_buffer(64)  # DLPackExchangeAPI: header (16 bytes) and 6 entries
ctypes.memmove(table_copy, _get(api, b"dlpack_exchange_api"), 64)


class Viewed(godlpack.GoTensor):
    __dlpack_c_exchange_api__ = _new(ctypes.addressof(table_copy), b"dlpack_exchange_api", None)


viewed = [godlpack.GoTensor(2, 3) for _ in range(8)]
for _v in viewed:
    _v.__class__ = Viewed
del _v
tvm = [Wrapper(tvm_ffi.from_dlpack(np.arange(6.0).reshape(2, 3))) for _ in range(8)]


def go_to_tvm(objs, n):
    rounds = max(1, n // len(objs))
    for _ in range(rounds):
        for o in objs:
            tvm_ffi.from_dlpack(o)
    return rounds * len(objs)


def into_go(objs, n):
    per = max(1, n // len(objs))
    for o in objs:
        godlpack.take_many(o, per)
    return per * len(objs)


CASES = [
    ("Go → tvm-ffi: `tvm_ffi.from_dlpack(GoTensor)` in a Python loop, tensor dropped", go, go_to_tvm, hide_go,
     "from_py", None),
    ("tvm-ffi → Go: Go takes a tvm-ffi tensor (DLTensorTestWrapper) and releases it, in a Go loop", tvm, into_go,
     hide_tvm, "table_imports", "protocol_imports"),
    ("Python → Go: Go takes a GoTensor and releases it, in a Go loop", go, into_go, hide_go,
     "table_imports", "protocol_imports"),
]


def view_vs_take():
    """Go views each object through the DLTensor entry (BorrowTensor) and
    takes it through the managed entry (Borrow), batches interleaved: the
    medians, ns per exchange."""
    per = max(1, N // len(viewed))
    view, take = [], []
    for _ in range(BATCHES):
        s0 = godlpack.exchange_stats()
        t0 = time.perf_counter_ns()
        for o in viewed:
            godlpack.view_many(o, per)
        view.append((time.perf_counter_ns() - t0) / (per * len(viewed)))
        s1 = godlpack.exchange_stats()
        t0 = time.perf_counter_ns()
        for o in viewed:
            godlpack.take_many(o, per)
        take.append((time.perf_counter_ns() - t0) / (per * len(viewed)))
        s2 = godlpack.exchange_stats()
        assert s1["table_views"] - s0["table_views"] == per * len(viewed), "DLTensor path not taken"
        assert s2["table_imports"] - s1["table_imports"] == per * len(viewed), "managed path not taken"
    return statistics.median(view), statistics.median(take)


def per_op(objs, fn):
    t0 = time.perf_counter_ns()
    n = fn(objs, N)
    return (time.perf_counter_ns() - t0) / n, n


def measure(objs, fn, toggle, table_stat, proto_stat, floor=None):
    """The medians of the table path and __dlpack__, batches interleaved;
    with floor (a list), a batch of fn on tvm-ffi's own type joins each
    round, so that the ratio to it compares batches that met the same
    machine load."""
    fn(objs, len(objs))  # warm up both paths
    toggle(False)
    fn(objs, len(objs))
    toggle(True)
    table, proto = [], []
    for _ in range(BATCHES):
        if floor is not None:
            floor.append(per_op(tvm, fn)[0])
        s0 = godlpack.exchange_stats()
        ns, n = per_op(objs, fn)
        table.append(ns)
        s1 = godlpack.exchange_stats()
        toggle(False)
        try:
            ns, n = per_op(objs, fn)
            proto.append(ns)
        finally:
            toggle(True)
        s2 = godlpack.exchange_stats()
        # Each path must have been the one taken, every time.
        assert s1[table_stat] - s0[table_stat] == n, "table path not taken"
        assert s2[table_stat] == s1[table_stat], "table used while hidden"
        if proto_stat:
            assert s2[proto_stat] - s1[proto_stat] == n, "__dlpack__ path not taken"
    return statistics.median(table), statistics.median(proto)


def main():
    global N
    rows = {}
    n, N = N, 100
    for name, objs, fn, toggle, ts, ps in CASES:  # a first pass: whatever Python makes once, it makes here
        rows[name] = measure(objs, fn, toggle, ts, ps)
    N = n
    floor = []  # made before the objects are counted
    refs = [sys.getrefcount(o) for o in go + tvm + viewed]
    live = godlpack.live()
    gc.collect()
    objects = len(gc.get_objects())
    for name, objs, fn, toggle, ts, ps in CASES:
        rows[name] = measure(objs, fn, toggle, ts, ps, floor if fn is go_to_tvm else None)
    view_vs_take()  # warm up
    view, take = view_vs_take()
    gc.collect()
    leaked = len(gc.get_objects()) - objects
    assert [sys.getrefcount(o) for o in go + tvm + viewed] == refs, "reference counts of the exchanged objects changed"
    stats = godlpack.exchange_stats()
    assert godlpack.live() == live and stats["live_lent"] == 0, "Go tensors left behind"
    assert godlpack.outstanding() == stats["live_exports"] == len(go) + len(viewed), "one export per GoTensor, held by it"
    assert leaked <= 0, f"{leaked} Python objects left behind"
    print("| exchange (same objects, one process) | through the table, ns | through `__dlpack__`, ns | speed-up |")
    print("|---|---|---|---|")
    for name, (t, p) in rows.items():
        print(f"| {name} | {t:.0f} | {p:.0f} | {p / t:.1f}× |")
    go.clear()
    viewed.clear()
    gc.collect()
    assert godlpack.outstanding() == 0, "exports outlived their objects"
    print(f"| floor of the first row: `tvm_ffi.from_dlpack` of tvm-ffi's own table type (DLTensorTestWrapper) | "
          f"{statistics.median(floor):.0f} | | |")
    ratio = rows[CASES[0][0]][0] / statistics.median(floor)
    print(f"\n- target: Go → tvm-ffi through the table within 1.5× of tvm-ffi's own type (the floor row): "
          f"{ratio:.2f}× (limit 1.5×): **{'met' if ratio <= 1.5 else 'missed'}**")
    print("\n| Go takes a Python object through a table (same objects, one process) | "
          "`dltensor_from_py_object_no_sync` + `BorrowTensor`, ns | "
          "`managed_tensor_from_py_object_no_sync` + `Borrow`, ns | speed-up |")
    print("|---|---|---|---|")
    print(f"| a GoTensor whose type carries a copy of its table (the C entries run), in a Go loop | "
          f"{view:.0f} | {take:.0f} | {take / view:.1f}× |")
    print(f"\n{N} exchanges per batch, median of {BATCHES} interleaved batches per path; "
          f"Python objects left behind: {max(leaked, 0)}; Go exports outstanding: {godlpack.outstanding()}; "
          f"tvm-ffi {tvm_ffi.__version__}, NumPy {np.__version__}, CPython {sys.version.split()[0]}.")


if __name__ == "__main__":
    main()
