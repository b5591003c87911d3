"""Writes the Arrow IPC files of dlarrow's file tests and FuzzOpenFile's
seeds with pyarrow's file writer (pa.ipc.new_file). Run it with the
project's venv from this folder: ../../../.venv/bin/python gen.py

Every file has a float64 column "x" = 0, 1, 2, ... across its batches
(so a reader can check it) next to the kind of column the file is about.
"""
import numpy as np
import pyarrow as pa
import pyarrow.feather


def table(n, start=0, **cols):
    return pa.table({"x": pa.array(np.arange(start, start + n, dtype=np.float64)), **cols})


def write(name, tables, schema=None, **opts):
    schema = schema or tables[0].schema
    with pa.ipc.new_file(name, schema, options=pa.ipc.IpcWriteOptions(**opts)) as w:
        for t in tables:
            if t.num_rows == 0:  # write_table writes no batch for no rows
                w.write_batch(pa.record_batch([c.combine_chunks() for c in t.columns], schema=t.schema))
            else:
                w.write_table(t)


def main():
    words = pa.array(["a", "b", "a", "c", "b"])
    write("dictionary.arrow", [table(5, d=words.dictionary_encode(), y=pa.array(np.arange(5, dtype=np.int32)))])
    # Two batches sharing one dictionary, and an int64 index type.
    d64 = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int64()), pa.array(["p", "q"]))
    write("dictionary_batches.arrow", [table(3, d=d64), table(3, 3, d=d64)])
    write("nested.arrow", [table(3,
                                  l=pa.array([[1], [2, 3], []], pa.list_(pa.int32())),
                                  s=pa.array([{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}, {"a": 5, "b": 6.0}]),
                                  f=pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float32)), 2))])
    tt = pa.fixed_shape_tensor(pa.float32(), (2, 2))
    ext = pa.ExtensionArray.from_storage(tt, pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 4))
    write("extension.arrow", [table(3, t=ext)])
    write("compressed_zstd.arrow", [table(64, y=pa.array(np.arange(64, dtype=np.int64)))], compression="zstd")
    write("compressed_lz4.arrow", [table(64)], compression="lz4")
    write("empty.arrow", [], schema=table(0).schema)
    write("empty_batch.arrow", [table(0)])
    write("many_batches.arrow", [table(2, 2 * i, y=pa.array([i, -i], pa.int16())) for i in range(20)])
    write("nulls.arrow", [table(3, z=pa.array([1.0, None, 3.0]))])
    # Compressed files as users meet them: write_feather compresses with
    # lz4 by default. Every kind of column whose buffers the reader bounds
    # (numbers, bools, strings, lists, dictionaries, fixed-size lists, maps,
    # structs, large strings, unions, run-end encoded, list views), in
    # two batches; plain.feather is the same table uncompressed (not a
    # FuzzOpenFile seed: seeds are the small *.arrow files).
    rng = np.random.default_rng(7)
    n = 300
    mixed = table(n,
                  i=pa.array(rng.integers(-2**31, 2**31, n, dtype=np.int32)),
                  u=pa.array(rng.integers(0, 2**64, n, dtype=np.uint64)),
                  h=pa.array(rng.standard_normal(n).astype(np.float16)),
                  z=pa.array(np.zeros(n, dtype=np.int64)),
                  b=pa.array(rng.integers(0, 2, n).astype(bool)),
                  s=pa.array([str(v) * (v % 5) for v in range(n)]),
                  l=pa.array([[v] * (v % 3) for v in range(n)], pa.list_(pa.int16())),
                  d=pa.array(["red", "green", "blue"] * (n // 3)).dictionary_encode(),
                  f=pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(3 * n)), 3),
                  m=pa.array([[("k", v)] for v in range(n)], pa.map_(pa.string(), pa.int32())),
                  st=pa.array([{"a": v, "b": str(v)} for v in range(n)]),
                  ls=pa.array([str(v) for v in range(n)], pa.large_string()),
                  un=pa.UnionArray.from_dense(pa.array(np.arange(n) % 2, pa.int8()), pa.array(np.arange(n) // 2, pa.int32()),
                                              [pa.array(np.arange(n), pa.int64()), pa.array([str(v) for v in range(n)])]),
                  re=pa.RunEndEncodedArray.from_arrays(pa.array([n // 2, n], pa.int32()), pa.array([1.0, 2.0])),
                  lv=pa.ListViewArray.from_arrays(pa.array(np.arange(n) % 3, pa.int32()), pa.array(np.ones(n), pa.int32()),
                                                  pa.array(np.arange(n), pa.int16())))
    batches = mixed.to_batches(max_chunksize=200)
    pa.feather.write_feather(pa.Table.from_batches(batches), "feather_lz4.feather", chunksize=200)
    pa.feather.write_feather(pa.Table.from_batches(batches), "feather_zstd.feather", compression="zstd", chunksize=200)
    write("plain.feather", [pa.Table.from_batches(batches)])
    # a string_view column: its data buffers are not bounded by the schema
    pa.feather.write_feather(table(4, v=pa.array(["a", "b", "c", "d"], pa.string_view())), "feather_view.feather")


if __name__ == "__main__":
    main()
