"""ONNX Runtime from Go (dlonnx, through libpybridges) side by side with ONNX
Runtime's own Python API: the same models, made here by the onnx package,
on the same NumPy inputs handed to Go by DLPack."""
import gc
import os

import numpy as np
import onnxruntime
import pytest

import goort


def python_run(path, feeds):
    s = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(["Y"], feeds)[0]


def mlp_inputs(dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 8)).astype(dtype), rng.standard_normal((8, 3)).astype(dtype),
            rng.standard_normal(3).astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_mlp_side_by_side(models, dtype):
    path = models / f"mlp_{dtype}.onnx"
    x, w, b = mlp_inputs(dtype, 1)
    want = python_run(path, {"X": x, "W": w, "B": b})

    s = goort.Session(path, ["X", "W", "B"], "Y")
    out = s.run(x, w, b, dtype=dtype, shape=(4, 3), expect=want)
    assert goort.last_equal() is True, "Go's output is Python's, bit for bit, compared in Go"
    # Shared, not copied: ONNX Runtime read NumPy's memory.
    for i, a in enumerate((x, w, b)):
        assert goort.input_address(i) == a.ctypes.data
        assert not goort.input_copied(i)
    got = np.from_dlpack(out)
    # Back in NumPy without a copy: the memory ONNX Runtime wrote.
    assert got.ctypes.data == goort.output_address()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), "bit for bit"
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).all() and (got > 0).any()
    assert goort.outstanding() == 1  # the array holds the output
    del got
    gc.collect()
    assert goort.outstanding() == 0
    s.close()


def test_strided_and_read_only_inputs_are_copied(models):
    path = models / "mlp_float32.onnx"
    x, w, b = mlp_inputs("float32", 2)
    xt = np.ascontiguousarray(x.T).T  # the same values, column-major
    w.flags.writeable = False
    want = python_run(path, {"X": x, "W": w, "B": b})
    s = goort.Session(path, ["X", "W", "B"], "Y")
    got = np.from_dlpack(s.run(xt, w, b, dtype="float32", shape=(4, 3), expect=want))
    assert goort.last_equal() is True
    assert goort.input_copied(0) and goort.input_copied(1) and not goort.input_copied(2)
    assert goort.input_address(2) == b.ctypes.data
    assert got.tobytes() == want.tobytes()
    del got
    gc.collect()
    assert goort.outstanding() == 0


def test_errors_release_everything(models):
    path = models / "mlp_float32.onnx"
    x, w, b = mlp_inputs("float64", 3)  # the model takes float32
    s = goort.Session(path, ["X", "W", "B"], "Y")
    with pytest.raises(ValueError, match="goort: "):
        s.run(x, w, b, dtype="float32", shape=(4, 3))
    x32, w32, b32 = mlp_inputs("float32", 3)
    with pytest.raises(ValueError, match="goort: "):
        s.run(x32, w32, b32, dtype="float32", shape=(5, 3))  # ORT refuses the output shape
    np.from_dlpack(s.run(x32, w32, b32, dtype="float32", shape=(4, 3), expect=np.zeros((4, 3), np.float32)))
    assert goort.last_equal() is False, "a different tensor is told apart"
    with pytest.raises(BufferError, match="input 0"):
        s.run(np.zeros((4, 8), dtype=np.complex64), w32, b32, dtype="float32", shape=(4, 3))
    gc.collect()
    assert goort.outstanding() == 0
    # The session still works.
    got = np.from_dlpack(s.run(x32, w32, b32, dtype="float32", shape=(4, 3)))
    assert got.tobytes() == python_run(path, {"X": x32, "W": w32, "B": b32}).tobytes()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_soak(models):
    """100,000 inferences, NumPy -> Go -> ORT -> NumPy: memory stays flat and
    nothing is outstanding."""
    path = models / "mlp_float32.onnx"
    x, w, b = mlp_inputs("float32", 4)
    want = python_run(path, {"X": x, "W": w, "B": b}).tobytes()
    s = goort.Session(path, ["X", "W", "B"], "Y")

    def rounds(n):
        for i in range(n):
            got = np.from_dlpack(s.run(x, w, b, dtype="float32", shape=(4, 3)))
            if i % 1000 == 0:
                assert got.tobytes() == want
    rounds(5_000)
    gc.collect()
    heap0, rss0 = goort.go_heap(), rss()
    rounds(100_000)
    gc.collect()
    heap1, rss1 = goort.go_heap(), rss()
    assert goort.outstanding() == 0
    assert heap1 - heap0 < 1 << 20, f"Go heap grew {heap0} -> {heap1}"
    assert rss1 - rss0 < 16 << 20, f"RSS grew {rss0} -> {rss1}"


def adopt_cases(rng):
    """Models whose output shape only the data gives, and a dynamic batch."""
    for n in (1, 9, 100):
        x = rng.standard_normal(n).astype(np.float32)
        x[rng.random(n) < 0.5] = 0
        yield "nonzero_float32", {"X": x}, 0
    for n in (3, 50):
        yield "compress_float16", {"X": rng.standard_normal(n).astype(np.float16), "C": rng.random(n) < 0.4}, 0
    for k in (1, 4):
        x = rng.standard_normal((3, 9)).astype(np.float32)
        yield "topk_float32", {"X": x, "K": np.array([k], dtype=np.int64)}, 0
        yield "topk_float32", {"X": x, "K": np.array([k], dtype=np.int64)}, 1
    for shape in ((3, 4), (-1, 6)):
        yield "reshape_float32", {"X": rng.standard_normal(12).astype(np.float32), "S": np.array(shape, dtype=np.int64)}, 0
    for batch in (1, 17):
        yield "batch_float32", {"X": rng.standard_normal((batch, 8)).astype(np.float32)}, 0


def test_outputs_ort_allocates_side_by_side(models):
    """Each output ONNX Runtime allocated from Go reaches NumPy in ORT's own
    memory, equal (dtype, shape, bytes) to what ORT's Python API gives."""
    rng = np.random.default_rng(11)
    sessions = {}
    for name, feeds, i in adopt_cases(rng):
        path = models / f"{name}.onnx"
        py = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = py.run(None, feeds)[i]
        s = sessions.setdefault(name, goort.AdoptingSession(path))
        got = np.from_dlpack(s.run(*feeds.values(), output=i))
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), f"{name}: bit for bit"
        if got.size:
            assert got.ctypes.data == goort.output_address(), "NumPy reads the memory ONNX Runtime allocated"
        del got
    gc.collect()
    assert goort.outstanding() == 0
    for s in sessions.values():
        s.close()


def test_adopting_session_checks_inputs(models):
    s = goort.AdoptingSession(models / "batch_float32.onnx")
    with pytest.raises(ValueError, match='input "X" dimension 1: 7, the model wants 8'):
        s.run(np.zeros((2, 7), dtype=np.float32))
    with pytest.raises(ValueError, match='input "X": float64, the model wants float32'):
        s.run(np.zeros((2, 8), dtype=np.float64))
    gc.collect()
    assert goort.outstanding() == 0
    s.close()
