"""The arrays of the side-by-side comparison with pyarrow: every numeric
type, sliced, empty, with nulls, boolean, dictionary, string, binary,
decimal, list, FixedSizeList, the fixed_shape_tensor extension,
temporal."""
import datetime

import numpy as np
import pyarrow as pa

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]


def fixed_shape_tensor(permutation):
    t = pa.fixed_shape_tensor(pa.float32(), (2, 3), permutation=permutation)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 6)
    return pa.ExtensionArray.from_storage(t, storage)


def cases():
    out = []
    for t in NUMERIC:
        out.append((t, pa.array(np.arange(1, 6).astype(t))))
    out += [
        ("float64 sliced [3:7]", pa.array(np.arange(10.0)).slice(3, 4)),
        ("int32 sliced [5:]", pa.array(np.arange(8, dtype=np.int32)).slice(5)),
        ("float64 empty", pa.array([], pa.float64())),
        ("int64 sliced empty", pa.array(np.arange(4)).slice(4)),
        ("float64 with nulls", pa.array([1.0, None, 3.0, None])),
        ("float64 nulls sliced away", pa.array([None, 1.0, 2.0, None]).slice(1, 2)),
        ("bool", pa.array([True, False, True])),
        ("dictionary<string>", pa.array(["a", "b", "a"]).dictionary_encode()),
        ("string", pa.array(["a", "bc"])),
        ("binary", pa.array([b"a", b"bc"])),
        ("decimal128(5, 2)", pa.array([1, 2], pa.decimal128(5, 2))),
        ("list<int32>", pa.array([[1], [2, 3]], pa.list_(pa.int32()))),
        ("fixed_size_list<int32>[3]", pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.int32)), 3)),
        ("fixed_size_list<float32>[2] sliced [1:]", pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float32)), 2).slice(1)),
        ("fixed_size_list<fixed_size_list<int16>[2]>[2]",
         pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8, dtype=np.int16)), 2), 2)),
        ("fixed_size_list<int32>[2] with a null value",
         pa.FixedSizeListArray.from_arrays(pa.array([1, None, 3, 4], pa.int32()), 2)),
        ("fixed_shape_tensor<float32>[2, 3]", fixed_shape_tensor(None)),
        ("fixed_shape_tensor<float32>[2, 3] permutation [1, 0]", fixed_shape_tensor([1, 0])),
        ("date32", pa.array([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)])),
        ("date64", pa.array([datetime.date(2024, 1, 1)], pa.date64())),
        ("time32[s]", pa.array([1, 2], pa.time32("s"))),
        ("time64[ns]", pa.array([1, 2], pa.time64("ns"))),
        ("timestamp[us]", pa.array([1, 2], pa.timestamp("us"))),
        ("timestamp[ms, tz=UTC]", pa.array([1, 2], pa.timestamp("ms", tz="UTC"))),
        ("duration[ns]", pa.array([1, 2], pa.duration("ns"))),
    ]
    return out
