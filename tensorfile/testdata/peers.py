"""The Python side of the tensorfile peer tests (driven by peers_test.go).

  peers.py write DIR  writes .npy (np.save and np.lib.format.write_array for
                      format 1.0, 2.0 and 3.0), .npz (np.savez,
                      np.savez_compressed, zipfile's bzip2 and LZMA) and
                      safetensors files
                      (safetensors.numpy.save_file) of every dtype, each
                      array's C-order little-endian bytes beside it in a
                      .bin file, and manifest.json listing them.
  peers.py check DIR  reads DIR/manifest.json written by Go and checks each
                      file with np.load and safetensors, bit for bit against
                      its .bin files.
  peers.py judge DIR  reads DIR/judge.json written by Go, a list of
                      [file, format], reads each file with its format's
                      reference reader (np.load, every member of an .npz
                      read; safetensors.deserialize) and prints, as JSON,
                      for each file "reads" or what the reader raises.
  peers.py lzma DIR   reads DIR/lzma.json written by Go, a list of
                      [file, size]: each file the data of a zip LZMA member
                      (as zipfile writes it), and prints, as JSON, for each
                      what liblzma makes of it: the SHA-256 of what it
                      decodes when that is a whole stream of size bytes,
                      else why not.
  peers.py save DIR   reads DIR/save.json written by Go: for each case, the
                      tensors (their .bin files) given to
                      safetensors.numpy.save must give WriteSafetensors' file
                      byte for byte, and CreateSafetensors' file the same
                      header JSON and data (its padding is to 64 bytes).
"""
import json
import os
import sys
import zipfile

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

NPY_DTYPES = ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8",
              "<f2", "<f4", "<f8", "<c8", "<c16"]
ST_DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
             "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64,
             "F16": np.float16, "F32": np.float32, "F64": np.float64, "C64": np.complex64,
             "BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn,
             "F8_E5M2": ml_dtypes.float8_e5m2, "F8_E8M0": ml_dtypes.float8_e8m0fnu,
             "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz}


def sample(dtype, shape, seed):
    """Deterministic data of every bit pattern the type allows (bools 0/1)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def matches(seed):
    """1.2 MB of random bytes, runs, and repeats at many distances."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 256, 300_000, dtype=np.uint8), np.zeros(200_000, np.uint8)]
    cur = np.concatenate(parts)
    for k in range(200):
        if k % 20 == 0:
            cur = np.concatenate(parts)
        off = int(rng.integers(max(0, len(cur) - 50_000), len(cur) - 5000))
        parts.append(cur[off:off + int(rng.integers(2, 5000))])
        parts.append(rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8))
    return np.concatenate(parts)


def dtype_name(dt):
    """NumPy's type string for builtin dtypes, the name for ml_dtypes ones."""
    try:
        if np.dtype(dt.str) == dt:
            return dt.str
    except TypeError:
        pass
    return dt.name


def le_bytes(a):
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes(order="C")


def write(d):
    os.makedirs(d, exist_ok=True)
    files = []

    def entry(path, kind, arrays, **extra):
        members = {}
        for name, a in arrays.items():
            b = name.replace("/", "_") or "array"
            bin_name = f"{os.path.basename(path)}.{b}.bin"
            with open(os.path.join(d, bin_name), "wb") as f:
                f.write(le_bytes(a))
            members[name] = {"bin": bin_name, "shape": list(a.shape), "dtype": dtype_name(a.dtype),
                             "fortran": bool(a.flags.f_contiguous and not a.flags.c_contiguous)}
        files.append({"file": os.path.basename(path), "kind": kind, "members": members, **extra})

    seed = 0
    for descr in NPY_DTYPES:
        for shape in [(3, 4), (2, 3, 5), (7,), (), (0, 3)]:
            seed += 1
            a = sample(descr, shape, seed)
            name = f"c{seed}_{descr[1:]}.npy"
            np.save(os.path.join(d, name), a)
            entry(os.path.join(d, name), "npy", {"": a}, writer="np.save")
        seed += 1
        f = np.asfortranarray(sample(descr, (4, 3, 2), seed))
        name = f"f{seed}_{descr[1:]}.npy"
        np.save(os.path.join(d, name), f)
        entry(os.path.join(d, name), "npy", {"": f}, writer="np.save fortran")
        for v in (1, 2, 3):
            seed += 1
            a = sample(descr, (5, 2), seed)
            if v == 2:
                a = np.asfortranarray(a)
            name = f"v{v}_{seed}_{descr[1:]}.npy"
            with open(os.path.join(d, name), "wb") as fh:
                np.lib.format.write_array(fh, a, version=(v, 0))
            entry(os.path.join(d, name), "npy", {"": a}, writer=f"write_array version {v}.0")
    for descr in [">f8", ">i4", ">c16", ">f2", ">u8"]:
        seed += 1
        a = sample(descr, (3, 2), seed)
        name = f"be{seed}_{descr[1:]}.npy"
        np.save(os.path.join(d, name), a)
        entry(os.path.join(d, name), "npy-big-endian", {"": a}, writer="np.save big-endian")

    arrays = {}
    for i, descr in enumerate(NPY_DTYPES):
        arrays[f"m_{descr[1:]}"] = sample(descr, (3, 1 + i % 4), 1000 + i)
    arrays["empty"] = np.zeros((0,), np.float32)
    arrays["fortran"] = np.asfortranarray(sample("<f4", (3, 4), 2000))
    arrays["big"] = sample(">f8", (2, 2), 2001)
    np.savez(os.path.join(d, "stored.npz"), **arrays)
    entry(os.path.join(d, "stored.npz"), "npz", arrays, writer="np.savez")
    np.savez_compressed(os.path.join(d, "deflated.npz"), **arrays)
    entry(os.path.join(d, "deflated.npz"), "npz", arrays, writer="np.savez_compressed")
    # zipfile's other methods, which np.load reads too, members written as
    # np.savez writes them; with arrays long enough for two bzip2 blocks
    # and LZMA matches of every kind.
    long = dict(arrays, large=matches(7), ramp=np.arange(300_000, dtype=np.int32) % 1000)
    for method, compression in {"bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}.items():
        path = os.path.join(d, f"{method}.npz")
        with zipfile.ZipFile(path, "w", compression=compression) as zf:
            for k, v in long.items():
                with zf.open(k + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, v, allow_pickle=False)
        entry(path, "npz", long, writer=f"zipfile {method}")

    tensors = {}
    for i, (st, dt) in enumerate(ST_DTYPES.items()):
        tensors[f"t.{st}"] = sample(dt, (2, 1 + i % 3), 3000 + i)
        tensors[f"s.{st}"] = sample(dt, (), 4000 + i)
        tensors[f"e.{st}"] = sample(dt, (0, 2), 5000 + i)
    meta = {"format": "pt", "note": "ünïcode ✓"}
    safetensors.numpy.save_file(tensors, os.path.join(d, "all.safetensors"), metadata=meta)
    entry(os.path.join(d, "all.safetensors"), "safetensors", tensors, writer="safetensors.numpy.save_file",
          metadata=meta, st_dtypes={k: k.split(".", 1)[1] for k in tensors})
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(files, f, indent=1)
    print(f"wrote {len(files)} files")


def check(d):
    with open(os.path.join(d, "manifest.json")) as f:
        files = json.load(f)
    n = 0
    for e in files:
        path = os.path.join(d, e["file"])
        if e["kind"] == "npy":
            got = {"": np.load(path)}
        elif e["kind"] == "npz":
            with np.load(path) as z:
                got = {k: z[k] for k in z.files}
        elif e["kind"] == "safetensors":
            with open(path, "rb") as f:
                raw = dict(safetensors.deserialize(f.read()))
            got = {}
            for name, t in raw.items():
                got[name] = np.frombuffer(bytes(t["data"]), ST_DTYPES[t["dtype"]]).reshape(t["shape"])
            # safe_open + get_tensor for what safetensors.numpy reads itself
            with safetensors.safe_open(path, framework="numpy") as so:
                assert so.metadata() == e.get("metadata"), (path, so.metadata(), e.get("metadata"))
                for name in so.keys():
                    if raw[name]["dtype"] in safetensors.numpy._TYPES:
                        t = so.get_tensor(name)
                        assert le_bytes(t) == le_bytes(got[name]), (path, name)
        else:
            raise SystemExit(f"unknown kind {e['kind']}")
        want = e["members"]
        assert sorted(got) == sorted(want), (path, sorted(got), sorted(want))
        for name, m in want.items():
            a = got[name]
            with open(os.path.join(d, m["bin"]), "rb") as f:
                wb = f.read()
            assert list(a.shape) == m["shape"], (path, name, a.shape, m["shape"])
            assert dtype_name(a.dtype) == m["dtype"], (path, name, a.dtype, m["dtype"])
            assert le_bytes(a) == wb, (path, name, "bytes differ")
            n += 1
    print(f"checked {n} tensors in {len(files)} files written by Go: bit for bit")


def split(b):
    """A safetensors file's header JSON (padding stripped) and data."""
    n = int.from_bytes(b[:8], "little")
    return b[8:8 + n].rstrip(b" "), b[8 + n:]


def save(d):
    with open(os.path.join(d, "save.json")) as f:
        cases = json.load(f)
    for c in cases:
        tensors = {}
        for t in c["tensors"]:
            with open(os.path.join(d, t["bin"]), "rb") as f:
                raw = f.read()
            tensors[t["name"]] = np.frombuffer(raw, ST_DTYPES[t["dtype"]]).reshape(t["shape"])
        with open(os.path.join(d, c["go"]), "rb") as f:
            go = f.read()
        with open(os.path.join(d, c["create"]), "rb") as f:
            created = f.read()
        # The crate lists several metadata keys in its hash map's order,
        # which changes from call to call: save until every order was seen.
        meta = c["metadata"]
        orders = 1
        for k in range(2, len(meta or {}) + 1):
            orders *= k
        seen = set()
        for _ in range(200 * orders):
            seen.add(safetensors.numpy.save(tensors, metadata=meta))
            if len(seen) == orders:
                break
        assert len(seen) == orders, (c["go"], len(seen), orders)
        assert go in seen, (c["go"], go[:400], sorted(seen)[0][:400])
        assert split(created) == split(go), (c["create"], split(created)[0][:400], split(go)[0][:400])
        assert (8 + int.from_bytes(created[:8], "little")) % 64 == 0, c["create"]
    print(f"{len(cases)} cases: WriteSafetensors wrote safetensors.numpy.save's bytes, "
          f"CreateSafetensors its header JSON and data (padded to 64)")


def judge(d):
    with open(os.path.join(d, "judge.json")) as f:
        files = json.load(f)
    out = {}
    for name, fmt in files:
        path = os.path.join(d, name)
        try:
            if fmt == "npy":
                np.load(path)
            elif fmt == "npz":
                with np.load(path) as z:
                    for k in z.files:
                        z[k]
            else:
                with open(path, "rb") as f:
                    safetensors.deserialize(f.read())
            out[name] = "reads"
        except Exception as e:  # what the reference reader raises is the point
            out[name] = f"raises {type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(out, ensure_ascii=False))


def lzma_members(d):
    import hashlib
    import lzma
    with open(os.path.join(d, "lzma.json")) as f:
        members = json.load(f)
    out = []
    for name, size in members:
        with open(os.path.join(d, name), "rb") as f:
            b = f.read()
        try:
            if len(b) < 4 or b[2:4] != b"\x05\x00" or len(b) < 9:
                raise ValueError("no LZMA properties")
            filt = lzma._decode_filter_properties(lzma.FILTER_LZMA1, b[4:9])
            dec = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt])
            data = dec.decompress(b[9:])
            if not dec.eof:
                out.append("the stream does not end")
            elif len(data) != size:
                out.append(f"{len(data)} bytes")
            else:
                out.append(hashlib.sha256(data).hexdigest())
        except Exception as e:  # what liblzma raises is the point
            out.append(f"raises {type(e).__name__}: {e}")
    print(json.dumps(out))


if __name__ == "__main__":
    {"write": write, "check": check, "save": save, "judge": judge, "lzma": lzma_members}[sys.argv[1]](sys.argv[2])
