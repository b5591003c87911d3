"""The suite's own Go helpers (gocuda, libgodlpack's gpu.go) checked on the
CPU against NumPy, so that `make gpu-check` proves them on a machine
without a GPU: what Go reports of an import, the CPU read and its
refusals, the options, the producer object kept and released, and the
exchange-table path (with tvm-ffi, whose test type publishes a table,
where it is installed)."""
import gc
import sys

import numpy as np
import pytest

import godlpack
import gocuda


def test_info_and_cpu_read_match_numpy():
    x = np.arange(24.0).reshape(4, 6)[1:, ::2]
    t = gocuda.go_import(x)
    gi = gocuda.info(t)
    assert gi["device"] == (gocuda.CPU, 0) and gi["dtype"] == (2, 64, 1)
    assert gi["shape"] == x.shape and gi["strides"] == tuple(s // 8 for s in x.strides)
    assert gi["addr"] == x.ctypes.data == t.data_address and gi["numel"] == x.size
    assert gocuda.cpu_sum(t) == x.sum()
    assert np.shares_memory(np.from_dlpack(t), x)
    t.close()
    with pytest.raises(gocuda.GoError) as e:
        gocuda.cpu_sum(t)
    assert e.value.sentinel == "ErrClosed"
    with pytest.raises(BufferError):
        gocuda.info(t)


def test_options_and_flags():
    ro = np.arange(4.0)
    ro.flags.writeable = False
    t = gocuda.go_import(ro)
    assert not gocuda.info(t)["writable"]
    cap = t.__dlpack__(max_version=(1, 3))
    assert gocuda.capsule_flags(cap) & gocuda.FLAG_READ_ONLY
    del cap
    t.close()
    legacy = np.arange(3.0).__dlpack__()  # a legacy capsule: read-only unless assumed writable
    t = gocuda.go_import(legacy, forward_stream=False)
    assert gocuda.info(t)["legacy"] and not gocuda.info(t)["writable"]
    t.close()
    t = gocuda.go_import(np.arange(3.0).__dlpack__(), assume_writable=True, allow_host_memory=True, forward_stream=False)
    assert gocuda.info(t)["writable"] and gocuda.cpu_sum(t) == 3.0
    t.close()
    with pytest.raises(TypeError):
        gocuda.go_import(object())


def test_the_producer_object_is_kept_until_close():
    x = np.arange(4.0)
    refs = sys.getrefcount(x)
    t = gocuda.go_import(x)  # keeps x and the imported tensor
    assert sys.getrefcount(x) == refs + 2
    with pytest.raises(RuntimeError, match="stream"):
        t.__dlpack__(stream=5)  # CPU tensors take only stream=None; nothing is asked of x
    t.close()
    gc.collect()
    assert sys.getrefcount(x) == refs
    s = gocuda.stats()
    assert s["outstanding"] == 0 and s["stream_syncs"] == 0


def test_exchange_table_path():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    src = np.arange(12.0).reshape(3, 4)
    w = tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(src))
    assert gocuda.exchange_table(w) is not None and gocuda.exchange_table(src) is None
    t = gocuda.go_import_table(w)
    gi = gocuda.info(t)
    assert gi["addr"] == src.ctypes.data and gi["shape"] == (3, 4) and gocuda.cpu_sum(t) == 66
    assert np.from_dlpack(t).tolist() == src.tolist()
    t.close()
    assert gocuda.work_stream(w, (gocuda.CPU, 0)) == 0
    with pytest.raises(TypeError):
        gocuda.go_import_table(src)
    assert godlpack.live() == 0
