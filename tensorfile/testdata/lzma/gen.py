"""Writes the LZMA test vectors of lzma_test.go (run from this directory
with the venv's Python; the files are committed).

Each NAME.lzma is the data of a zip method 14 member as zipfile writes
it: a 2-byte version, the 2-byte properties size (5), the properties and
a raw LZMA1 stream (liblzma's, ended by an end marker); NAME.bin is what
it decodes to.
"""
import io
import lzma
import random
import struct

import numpy as np


def text(n, seed):
    r = random.Random(seed)
    words = [bytes(r.choice(b"abcdefghij ") for _ in range(r.randint(1, 9))) for _ in range(50)]
    out = b""
    while len(out) < n:
        out += r.choice(words) + b" "
    return out[:n]


def far_repeats(n, seed):
    r = random.Random(seed)
    out = bytearray(r.randbytes(600))
    while len(out) < n:
        if r.random() < 0.3:
            out += r.randbytes(r.randint(1, 30))
        else:
            d = r.randint(1, min(len(out), 4000))
            for _ in range(r.randint(2, 300)):
                out.append(out[-d])
    return bytes(out[:n])


npy = io.BytesIO()
np.save(npy, np.zeros(3))

VECTORS = {
    "text": (text(20000, 1), {"preset": 6}),
    "small_dict": (far_repeats(30000, 2), {"dict_size": 4096, "lc": 0, "lp": 2, "pb": 0}),
    "lc4_pb4": (text(8000, 3) + far_repeats(8000, 4), {"lc": 4, "lp": 0, "pb": 4, "mode": lzma.MODE_FAST, "mf": lzma.MF_HC3}),
    "long_runs": (b"\0" * 3000 + b"ab" * 500 + b"\xff" * 10000, {"lc": 1, "lp": 3, "pb": 1, "nice_len": 273}),
    "empty": (b"", {}),
    "random": (random.Random(5).randbytes(3000), {"preset": 9}),
    "tiny": (b"hello hello hello hello", {"dict_size": 4096}),
    "npy3": (npy.getvalue(), {}),
}

for name, (data, opts) in VECTORS.items():
    filt = {"id": lzma.FILTER_LZMA1, **opts}
    props = lzma._encode_filter_properties(filt)
    raw = lzma.compress(data, format=lzma.FORMAT_RAW, filters=[filt])
    assert lzma.decompress(raw, format=lzma.FORMAT_RAW, filters=[lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)]) == data
    with open(name + ".lzma", "wb") as f:
        f.write(struct.pack("<BBH", 9, 20, len(props)) + props + raw)
    with open(name + ".bin", "wb") as f:
        f.write(data)
    print(name, len(data), "->", len(raw))
