"""The Python side of the .npz archive peer tests (driven by npz_peers_test.go).

  npz_peers.py load FILE  prints, as JSON, np.load(FILE).files and either
                          "ok" (every member read) or the exception raised.
"""
import json
import sys

import numpy as np


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
    {"load": load}[sys.argv[1]](sys.argv[2])

