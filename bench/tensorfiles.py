"""Tensor files for `make compare`: opening a file and taking every tensor in
it, in NumPy (np.load(f, mmap_mode="r")) and safetensors
(safe_open(f, framework="numpy").get_tensor), for the files the Go benchmark
BenchmarkOpenExport (package tensorfile) opens.

  tensorfiles.py make DIR   writes the files: 4 float32 tensors (safetensors)
                            and one float32 array (.npy), of 1 KiB and 1 GiB
                            each, sparse (the data is a hole, never written),
                            and a safetensors file of 1000 4x4 float32 tensors,
                            and one of 10,000 (names.safetensors)
  tensorfiles.py time DIR   prints "<name> <ns per op>" lines
  tensorfiles.py names DIR  prints the ns per safe_open + keys() of
                            names.safetensors (BenchmarkOpenNames in Go)
"""
import json
import os
import struct
import sys
import time

import numpy as np

SIZES = {"1KiB": 1 << 10, "1GiB": 1 << 30}


def make(d):
    for name, total in SIZES.items():
        per = total // 4 // 4
        hdr = {f"t{i}": {"dtype": "F32", "shape": [per], "data_offsets": [i * per * 4, (i + 1) * per * 4]}
               for i in range(4)}
        js = json.dumps(hdr, separators=(",", ":")).encode()
        js += b" " * (-len(js) % 8)
        p = os.path.join(d, f"b-{name}.safetensors")
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(js)) + js)
        os.truncate(p, 8 + len(js) + 4 * per * 4)
        p = os.path.join(d, f"b-{name}.npy")
        with open(p, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (total // 4,)})
            head = f.tell()
        os.truncate(p, head + total)
    # headers like a model's: 1000 and 10,000 small tensors
    for n, name in [(1000, "many"), (10_000, "names")]:
        hdr = {f"model.layers.{i // 10}.mlp.weight_{i % 10}": {"dtype": "F32", "shape": [4, 4],
                                                                "data_offsets": [i * 64, (i + 1) * 64]}
               for i in range(n)}
        js = json.dumps(hdr, separators=(",", ":")).encode()
        js += b" " * (-len(js) % 8)
        p = os.path.join(d, f"{name}.safetensors")
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(js)) + js)
        os.truncate(p, 8 + len(js) + n * 64)


def bench(fn, budget=1.0, least=5):
    fn()
    n, t0 = 0, time.perf_counter()
    while n < least or time.perf_counter() - t0 < budget:
        fn()
        n += 1
    return (time.perf_counter() - t0) / n * 1e9


def timeall(d):
    import safetensors

    for name in SIZES:
        p = os.path.join(d, f"b-{name}.npy")

        def npload():
            a = np.load(p, mmap_mode="r")
            del a
        print(f"npy/{name} {bench(npload):.0f}")
        p2 = os.path.join(d, f"b-{name}.safetensors")

        def stload():
            with safetensors.safe_open(p2, framework="numpy") as f:
                for k in f.keys():
                    f.get_tensor(k)
        print(f"safetensors/{name} {bench(stload, least=3):.0f}")
    p3 = os.path.join(d, "many.safetensors")

    def manyload():
        with safetensors.safe_open(p3, framework="numpy") as f:
            for k in f.keys():
                f.get_tensor(k)
    print(f"safetensors/1000tensors {bench(manyload):.0f}")


def names(d):
    import safetensors

    p = os.path.join(d, "names.safetensors")

    def opennames():
        with safetensors.safe_open(p, framework="numpy") as f:
            f.keys()
    print(f"{bench(opennames):.0f}")


if __name__ == "__main__":
    {"make": make, "time": timeall, "names": names}[sys.argv[1]](sys.argv[2])
