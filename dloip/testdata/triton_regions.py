"""Regions made with tritonclient.utils.shared_memory for the dloip Go
client: creates an input region holding a random FP32 [256, 1024] array
and an empty output region, prints their keys and byte size, waits for a
line on stdin (the Go side has run its inference through them), then
reads the output region with tritonclient's get_contents_as_numpy and
requires it to equal the input bit for bit, and destroys both.

usage: python triton_regions.py
"""
import os
import sys

import numpy as np
import tritonclient.utils.shared_memory as shm


def main():
    a = np.random.default_rng(5).standard_normal((256, 1024)).astype(np.float32)
    pid = os.getpid()
    kin, kout = f"/dloip_go_in_{pid}", f"/dloip_go_out_{pid}"
    hin = shm.create_shared_memory_region("in", kin, a.nbytes)
    hout = shm.create_shared_memory_region("out", kout, a.nbytes)
    try:
        shm.set_shared_memory_region(hin, [a])
        print(kin, kout, a.nbytes, flush=True)
        sys.stdin.readline()
        got = shm.get_contents_as_numpy(hout, np.float32, a.shape)
        if got.tobytes() != a.tobytes():
            sys.exit("the output region differs from the input region")
        print(f"tritonclient regions -> dloip client -> dloip server: {a.nbytes} bytes in and out by region, bit for bit (read back by get_contents_as_numpy)", flush=True)
    finally:
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)


if __name__ == "__main__":
    main()
