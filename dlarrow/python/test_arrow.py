"""dlarrow inside Python: the DLPack protocol of Go-held Arrow arrays
(NumPy and JAX as consumers), DLPack producers into Arrow (pyarrow as the
independent reader), and Feather files mapped by Go."""
import gc

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pytest

import godlarrow


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlarrow.outstanding() == 0
    assert godlarrow.live() == 0


def test_versioned_shares_read_only():
    a = pa.array(np.arange(8.0)).slice(2)
    g = godlarrow.GoArrow(a)
    x = np.from_dlpack(g)
    assert x.tolist() == list(range(2, 8))
    assert not x.flags.writeable
    assert x.ctypes.data == a.buffers()[1].address + 2 * 8
    cap = g.__dlpack__(max_version=(1, 3))
    assert "dltensor_versioned" in repr(cap)


def test_legacy_request_copies():
    a = pa.array(np.arange(4, dtype=np.int32))
    g = godlarrow.GoArrow(a)
    cap = g.__dlpack__()  # max_version=None: legacy, which cannot say read-only
    assert '"dltensor"' in repr(cap)
    with pytest.raises(BufferError, match="(?i)read-only|copy"):
        g.__dlpack__(copy=False)
    x = np.from_dlpack(g, copy=True)
    assert x.tolist() == [0, 1, 2, 3] and x.flags.writeable
    assert x.ctypes.data != a.buffers()[1].address
    del cap


def test_jax():
    a = pa.array(np.arange(6, dtype=np.float32))
    y = jnp.from_dlpack(godlarrow.GoArrow(a))
    assert y.tolist() == list(range(6))


def test_go_built_array_to_numpy():
    g = godlarrow.GoArrow.arange(5)
    x = np.from_dlpack(g)
    del g  # the export holds the array
    gc.collect()
    assert x.tolist() == [0, 1, 2, 3, 4] and not x.flags.writeable


def test_temporal_unit():
    a = pa.array([1, 2], pa.timestamp("us"))
    g = godlarrow.GoArrow(a)
    assert g.unit == "us"
    x = np.from_dlpack(g)
    assert (x.view("datetime64[us]") == a.to_numpy()).all()
    assert godlarrow.GoArrow(pa.array([0], pa.date32())).unit == "D"


def test_into_arrow_shares():
    x = np.arange(6.0)
    a = godlarrow.to_arrow(x)
    assert a.equals(pa.array(x))
    assert a.buffers()[1].address == x.ctypes.data
    y = np.arange(12, dtype=np.int16).reshape(4, 3)
    b = godlarrow.to_arrow(y)
    assert b.equals(pa.FixedSizeListArray.from_arrays(pa.array(y.ravel()), 3))
    del x, y
    gc.collect()
    assert a.to_pylist() == list(range(6))  # the array keeps NumPy's memory alive
    assert b[3].as_py() == [9, 10, 11]


def test_into_arrow_refusals_and_copies():
    x = np.arange(10.0)[::2]
    with pytest.raises(BufferError, match="CopyToArray"):
        godlarrow.to_arrow(x)
    assert godlarrow.to_arrow(x, copy=True).equals(pa.array(x))
    m = np.array([True, False, True])
    with pytest.raises(BufferError, match="bit"):
        godlarrow.to_arrow(m)
    assert godlarrow.to_arrow(m, copy=True).equals(pa.array(m))
    with pytest.raises(BufferError, match="dtype"):
        godlarrow.to_arrow(np.arange(3, dtype=np.complex64))


def mapped_ranges(path):
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith(str(path)):
                lo, hi = line.split()[0].split("-")
                out.append((int(lo, 16), int(hi, 16)))
    return out


def test_feather_file_mapped(tmp_path):
    path = tmp_path / "data.feather"
    shape_t = pa.fixed_shape_tensor(pa.int32(), (2, 3))
    tensors = pa.ExtensionArray.from_storage(
        shape_t, pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6000, dtype=np.int32)), 6))
    t = pa.table({"x": np.arange(1000.0), "s": ["a"] * 1000, "t": tensors})
    feather.write_feather(t, path, compression="uncompressed")
    f = godlarrow.MappedFile(path)
    col = f.column(0)
    x = np.from_dlpack(col)
    assert x.tolist() == t["x"].to_pylist()
    assert not x.flags.writeable
    ranges = mapped_ranges(path)
    assert any(lo <= x.ctypes.data < hi for lo, hi in ranges), "the column is not in the mapping"
    with pytest.raises(BufferError, match="utf8"):
        f.column(1)
    y = np.from_dlpack(f.column(2))  # the fixed_shape_tensor extension, through the file's field
    assert y.shape == (1000, 2, 3) and (y == tensors.to_numpy_ndarray()).all()
    del y
    f.close()
    del col
    gc.collect()
    assert mapped_ranges(path), "unmapped while NumPy holds a column"
    assert x[999] == 999.0
    del x
    gc.collect()
    assert not mapped_ranges(path), "still mapped after the last release"


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_feather_compressed_decompressed(tmp_path, compression):
    # write_feather compresses with lz4 by default: Go decompresses the
    # batch into its own memory (not the mapping), bit for bit as pyarrow
    path = tmp_path / f"{compression}.feather"
    t = pa.table({"x": np.arange(1000.0), "s": ["a"] * 1000, "i": np.arange(1000, dtype=np.int16)[::-1]})
    feather.write_feather(t, path, compression=compression)
    f = godlarrow.MappedFile(path)
    x, i = np.from_dlpack(f.column(0)), np.from_dlpack(f.column(2))
    want = feather.read_table(path)
    assert x.tobytes() == want["x"].to_numpy().tobytes()
    assert i.tobytes() == want["i"].to_numpy().tobytes()
    assert not x.flags.writeable
    assert not any(lo <= x.ctypes.data < hi for lo, hi in mapped_ranges(path)), "a decompressed column in the mapping"
    with pytest.raises(BufferError, match="utf8"):
        f.column(1)
    f.close()
    gc.collect()
    assert x[999] == 999.0 and i[0] == 999
