"""The Python side of the tensorfile command's tests (main_test.go).

  peers.py write DIR     writes files with NumPy (np.save, np.savez,
                         np.savez_compressed), safetensors
                         (safetensors.numpy.save_file) and pyarrow (IPC
                         files of fixed_shape_tensor and primitive columns)
                         into DIR, and prints a JSON list of their names.
  peers.py read FILE...  reads each file with its own library (np.load,
                         safetensors.deserialize and safe_open,
                         pyarrow.ipc.open_file) and
                         prints, as JSON, each file's tensors (dtype name,
                         shape, SHA-256 of the C-order little-endian bytes)
                         and metadata.

An Arrow file is read as the command reads it: an IPC file of one record
batch of one row gives each fixed_shape_tensor column as the tensor of
that row; otherwise a fixed_shape_tensor column is a (rows, ...) tensor;
primitive columns are 1-d; columns of several batches are named
"name[batch]"; columns that are not numbers are left out.
"""
import hashlib
import importlib.util
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.feather
import safetensors
import safetensors.numpy

# The dtype tables and the sample data are tensorfile's own peers' (its
# testdata/peers.py), so that both test suites write the same files.
_spec = importlib.util.spec_from_file_location(
    "tensorfile_peers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tensorfile", "testdata", "peers.py"))
_tf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tf)
NPY_DTYPES = _tf.NPY_DTYPES
ST_NAMES = _tf.ST_DTYPES
ST_DTYPES = list(ST_NAMES.values())
sample = _tf.sample

ARROW_DTYPES = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
                "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
                "float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64()}


def le_bytes(a):
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes(order="C")


def fst_column(a):
    """a (rows, ...) array as a fixed_shape_tensor column."""
    rows, shape = a.shape[0], a.shape[1:]
    width = int(np.prod(shape))
    typ = pa.fixed_shape_tensor(pa.from_numpy_dtype(a.dtype), list(shape))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(a).reshape(-1)), width)
    assert len(storage) == rows
    return pa.ExtensionArray.from_storage(typ, storage)


def write_arrow(path, table, batch_rows=None):
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=batch_rows)


def write(d):
    os.makedirs(d, exist_ok=True)
    files = []
    seed = 0
    # one .npy file per dtype, a Fortran-order one, a 0-d one, an empty one
    for descr in NPY_DTYPES:
        seed += 1
        name = f"np_{descr[1:]}.npy"
        np.save(os.path.join(d, name), sample(descr, (2, 3), seed))
        files.append(name)
    for name, a in [("np_fortran.npy", np.asfortranarray(sample("<f8", (3, 4), 100))),
                    ("np_scalar.npy", sample("<i2", (), 101)),
                    ("np_empty.npy", sample("<f4", (0, 3), 102))]:
        np.save(os.path.join(d, name), a)
        files.append(name)
    arrays = {f"m_{descr[1:]}": sample(descr, (3, 1 + i % 4), 200 + i) for i, descr in enumerate(NPY_DTYPES)}
    arrays["fortran"] = np.asfortranarray(sample("<f4", (3, 4), 300))
    arrays["scalar"] = sample("<u2", (), 301)
    np.savez(os.path.join(d, "np_stored.npz"), **arrays)
    np.savez_compressed(os.path.join(d, "np_deflated.npz"), **arrays)
    files += ["np_stored.npz", "np_deflated.npz"]

    tensors = {}
    for i, dt in enumerate(ST_DTYPES):
        n = np.dtype(dt).name
        tensors[f"t.{n}"] = sample(dt, (2, 1 + i % 3), 400 + i)
        tensors[f"s.{n}"] = sample(dt, (), 500 + i)
    tensors["e.float32"] = np.zeros((0, 2), np.float32)
    safetensors.numpy.save_file(tensors, os.path.join(d, "st_all.safetensors"),
                                metadata={"format": "np", "note": "ünïcode ✓"})
    files.append("st_all.safetensors")

    # one row of fixed_shape_tensor columns, one per Arrow number type, a
    # permuted one (a strided tensor), and schema metadata
    cols, names = [], []
    for i, (n, typ) in enumerate(ARROW_DTYPES.items()):
        cols.append(fst_column(sample(typ.to_pandas_dtype(), (1, 2, 1 + i % 3), 600 + i)))
        names.append(f"t_{n}")
    a = sample(np.float32, (1, 3, 4), 700)
    perm = pa.fixed_shape_tensor(pa.float32(), [3, 4], permutation=[1, 0])
    cols.append(pa.ExtensionArray.from_storage(perm, pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), 12)))
    names.append("permuted")
    table = pa.table(cols, names=names).replace_schema_metadata({"source": "pyarrow", "rows": "1"})
    write_arrow(os.path.join(d, "pa_row.arrow"), table)
    files.append("pa_row.arrow")

    # a table: four rows of tensors, primitive columns, a string column
    table = pa.table({
        "images": fst_column(sample(np.uint8, (4, 2, 2), 800)),
        "label": pa.array(sample(np.int64, (4,), 801)),
        "score": pa.array(sample(np.float16, (4,), 802)),
        "text": pa.array(["a", "b", "c", "d"]),
    })
    write_arrow(os.path.join(d, "pa_table.arrow"), table)
    files.append("pa_table.arrow")
    # the same table as feather.write_feather writes it: compressed, lz4
    # by default, or zstd
    pa.feather.write_feather(table, os.path.join(d, "pa_feather_lz4.arrow"))
    pa.feather.write_feather(table, os.path.join(d, "pa_feather_zstd.arrow"), compression="zstd")
    files += ["pa_feather_lz4.arrow", "pa_feather_zstd.arrow"]
    # two record batches
    table = pa.table({"x": pa.array(sample(np.int32, (6,), 900)),
                      "v": fst_column(sample(np.float64, (6, 2), 901))})
    write_arrow(os.path.join(d, "pa_batches.arrow"), table, batch_rows=3)
    files.append("pa_batches.arrow")
    print(json.dumps(files))


def describe(a):
    return {"dtype": a.dtype.name, "shape": list(a.shape), "sha256": hashlib.sha256(le_bytes(a)).hexdigest()}


def read_arrow(path):
    with pa.ipc.open_file(path) as r:
        batches = [r.get_batch(i) for i in range(r.num_record_batches)]
        schema = r.schema
    one_row = len(batches) == 1 and batches[0].num_rows == 1
    got = {}
    for b, batch in enumerate(batches):
        for field, col in zip(schema, batch.columns):
            name = field.name if len(batches) == 1 else f"{field.name}[{b}]"
            if isinstance(field.type, pa.FixedShapeTensorType):
                a = col.to_numpy_ndarray()
                got[name] = a[0] if one_row else a
            elif pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
                got[name] = col.to_numpy()
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    return got, meta


def read_one(path):
    """path's tensors and metadata as its own library reads them."""
    meta = {}
    if path.endswith(".npy"):
        got = {"": np.load(path)}
    elif path.endswith(".npz"):
        with np.load(path) as z:
            got = {k: z[k] for k in z.files}
    elif path.endswith(".safetensors"):
        # deserialize gives every dtype's bytes; safe_open's numpy
        # reader (which lacks the float8 types) must agree on the rest
        with open(path, "rb") as f:
            raw = dict(safetensors.deserialize(f.read()))
        got = {name: np.frombuffer(bytes(t["data"]), ST_NAMES[t["dtype"]]).reshape(t["shape"])
               for name, t in raw.items()}
        with safetensors.safe_open(path, framework="numpy") as so:
            meta = so.metadata() or {}
            assert sorted(so.keys()) == sorted(got), path
            for name in so.keys():
                if raw[name]["dtype"] in safetensors.numpy._TYPES:
                    assert le_bytes(so.get_tensor(name)) == le_bytes(got[name]), (path, name)
    elif path.endswith(".arrow"):
        got, meta = read_arrow(path)
    else:
        raise SystemExit(f"unknown format: {path}")
    return {"tensors": {k: describe(v) for k, v in got.items()}, "metadata": meta}


def read(paths):
    print(json.dumps({path: read_one(path) for path in paths}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        read(sys.argv[2:])
