"""The Python side of the .npz archive peer tests (driven by npz_peers_test.go).

  npz_peers.py write DIR  writes .npz archives with zipfile's stored,
                          deflate, bzip2 and LZMA methods (members written as
                          np.savez writes them), each member as np.load reads
                          it in a .bin file (C-order little-endian bytes), and
                          manifest.json listing them (peers.py's format).
  npz_peers.py load FILE  prints, as JSON, np.load(FILE).files and either
                          "ok" (every member read) or the exception raised.
"""
import json
import os
import sys
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import NPY_DTYPES, dtype_name, le_bytes, sample  # noqa: E402

METHODS = {"stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED,
           "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}


def arrays():
    a = {}
    for i, descr in enumerate(NPY_DTYPES):
        a[f"m_{descr[1:]}"] = sample(descr, (3, 1 + i % 4), 1000 + i)
    a["empty"] = np.zeros((0,), np.float32)
    a["fortran"] = np.asfortranarray(sample("<f4", (3, 4), 2000))
    a["big_endian"] = sample(">f8", (2, 2), 2001)
    # Long enough for two bzip2 blocks and LZMA matches of every kind:
    # random bytes, runs, and repeats at many distances.
    rng = np.random.default_rng(7)
    parts = [rng.integers(0, 256, 300_000, dtype=np.uint8), np.zeros(200_000, np.uint8)]
    cur = np.concatenate(parts)
    for k in range(200):
        if k % 20 == 0:
            cur = np.concatenate(parts)
        off = int(rng.integers(max(0, len(cur) - 50_000), len(cur) - 5000))
        parts.append(cur[off:off + int(rng.integers(2, 5000))])
        parts.append(rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8))
    a["large"] = np.concatenate(parts)
    a["ramp"] = np.arange(300_000, dtype=np.int32) % 1000
    return a


def write(d):
    os.makedirs(d, exist_ok=True)
    files = []
    src = arrays()
    for mname, method in METHODS.items():
        name = f"{mname}.npz"
        path = os.path.join(d, name)
        with zipfile.ZipFile(path, "w", compression=method) as zf:
            for k, v in src.items():
                with zf.open(k + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, v, allow_pickle=False)
        members = {}
        with np.load(path) as z:
            for k in z.files:
                v = z[k]
                b = f"{name}.{k}.bin"
                with open(os.path.join(d, b), "wb") as f:
                    f.write(le_bytes(v))
                members[k] = {"bin": b, "shape": list(v.shape), "dtype": dtype_name(v.dtype),
                              "fortran": bool(v.flags.f_contiguous and not v.flags.c_contiguous)}
        files.append({"file": name, "kind": "npz", "writer": f"zipfile {mname}", "members": members})
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(files, f, indent=1)
    print(f"wrote {len(files)} archives")


def load(path):
    out = {}
    try:
        with np.load(path) as z:
            out["files"] = z.files
            for k in z.files:
                z[k]
        out["result"] = "ok"
    except Exception as e:  # what NumPy raises is the point
        out["result"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    {"write": write, "load": load}[sys.argv[1]](sys.argv[2])
