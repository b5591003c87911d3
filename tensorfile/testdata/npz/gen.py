"""Writes the archives of npz_test.go's TestNPZZipfileArchives (run from
this directory with the venv's Python; the files are committed): two
arrays, a = arange(6, int32).reshape(2, 3) and b = arange(3.0), written as
np.savez writes members (zipfile.ZipFile.open(..., force_zip64=True),
which gives zip64 local headers), with each method zipfile has.
"""
import zipfile

import numpy as np

ARRAYS = {"a": np.arange(6, dtype="<i4").reshape(2, 3), "b": np.arange(3.0)}

for name, method in {"stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED,
                     "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}.items():
    with zipfile.ZipFile(f"{name}.npz", "w", compression=method) as zf:
        for k, v in ARRAYS.items():
            with zf.open(k + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, v, allow_pickle=False)
    with np.load(f"{name}.npz") as z:
        assert all((z[k] == v).all() and z[k].dtype == v.dtype for k, v in ARRAYS.items())
