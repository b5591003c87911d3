"""The peer-written conformance corpus of the tensorfile command and its
libraries (conformance_test.go).

  conformance.py write DIR   writes every file of the corpus into DIR with
                             the peers (np.save, np.savez,
                             np.savez_compressed, zipfile with ZIP_BZIP2 and
                             ZIP_LZMA, safetensors.numpy.save_file,
                             pyarrow's IPC writer and feather.write_feather),
                             the hostile ones by editing the bytes a peer
                             wrote, then reads each with its format's
                             reference reader and writes DIR/manifest.json.
  conformance.py read        reads each file named on a line of standard
                             input with its reference reader and prints, as
                             JSON, what it reads or raises.

manifest.json lists ("files"), for each file: its name, format, a description, what
the reference reader does ("peer": {"reads": {tensors, metadata}} with each
tensor's dtype, shape and the SHA-256 of its C-order little-endian bytes,
or {"raises": "Type: message"}), and the outcome expected of package
tensorfile or dlarrow ("expect"):
  equal              read equal to the peer, bit for bit;
  refused-as-peer    refused, as the peer refuses it, with "sentinel";
  refused-peer-reads refused although the peer reads it, with "sentinel",
                     for "reason" (a bound or a check set on purpose).
It also names ("sweep") small valid files of each format, for the
flipped-byte sweeps. The reference readers are peers.py's: np.load (every member of an .npz
read), safetensors.deserialize and safe_open, pyarrow.ipc.open_file.
"""
import json
import os
import struct
import sys
import warnings
import zipfile

import ml_dtypes
import numpy as np
import pyarrow as pa
import pyarrow.feather
import safetensors.numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402  (the command's peer script: readers and sample data)

sample = peers.sample


def npy_bytes(header, data, version=(1, 0)):
    """A .npy file of a header text (not padded) and data."""
    h = header.encode("latin1")
    if version == (1, 0):
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(h)) + h + data


def descr_header(a, shape=None):
    return "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        a.dtype.str, shape if shape is not None else repr(tuple(a.shape)))


def patch_zip_name(data, old, new):
    """Replaces member name old by new (same length) in the local header
    and the central directory entry; the CRC covers the data only."""
    assert len(old) == len(new)
    n = data.count(old)
    assert n == 2, (old, n)
    return data.replace(old, new)


def flip_member_data(data):
    """Flips one bit in the data of the first member, after its .npy
    header."""
    b = bytearray(data)
    i = b.index(b"\x93NUMPY")  # the member's .npy preamble (stored members)
    hlen = struct.unpack("<H", b[i + 8:i + 10])[0]
    b[i + 10 + hlen + 3] ^= 0x10
    return bytes(b)


def write(d):
    os.makedirs(d, exist_ok=True)
    cases = []

    def case(name, fmt, what, expect="equal", sentinel=None, reason=None):
        c = {"file": name, "format": fmt, "what": what, "expect": expect}
        if sentinel:
            c["sentinel"] = sentinel
        if reason:
            c["reason"] = reason
        cases.append(c)

    def put(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    p = lambda name: os.path.join(d, name)  # noqa: E731

    # .npy: every dtype np.save writes, Fortran order, 0-d, empty
    for i, descr in enumerate(peers.NPY_DTYPES):
        name = f"npy_{np.dtype(descr).name}.npy"
        np.save(p(name), sample(descr, (2, 3), 10 + i))
        case(name, "npy", f"np.save of {np.dtype(descr).name}, shape (2, 3)")
    np.save(p("npy_fortran.npy"), np.asfortranarray(sample("<f8", (3, 4), 40)))
    case("npy_fortran.npy", "npy", "np.save of a Fortran-order float64 array")
    np.save(p("npy_scalar.npy"), sample("<i2", (), 41))
    case("npy_scalar.npy", "npy", "np.save of a 0-d int16 array")
    np.save(p("npy_empty.npy"), sample("<f4", (0, 3), 42))
    case("npy_empty.npy", "npy", "np.save of an empty (0, 3) float32 array")
    np.save(p("npy_bigendian.npy"), sample(">i4", (2, 2), 43))
    case("npy_bigendian.npy", "npy", "np.save of a big-endian int32 array", "refused-peer-reads", "tensorfile.ErrByteOrder",
         "OpenNPY maps, and big-endian data cannot be mapped for a little-endian consumer (ReadNPY converts it)")
    # a header not padded to 64 bytes: the data at offset 68, misaligned
    # for float64 (written by hand, as old writers did)
    a = sample("<f8", (2, 3), 44)
    h = descr_header(a)
    h += " " * (68 - 10 - len(h) - 1) + "\n"
    put("npy_data_at_68.npy", npy_bytes(h, a.tobytes()))
    case("npy_data_at_68.npy", "npy", "float64 data at offset 68 (header not padded to alignment)")
    # Python 2's shapes: (2L, 3L)
    a = sample("|u1", (2, 3), 45)
    put("npy_py2_shape.npy", npy_bytes(descr_header(a, "(2L, 3L)") + "\n", a.tobytes()))
    case("npy_py2_shape.npy", "npy", "shape written by Python 2, (2L, 3L)")
    # header lengths: 1 GiB claimed in a small file, and 256 MiB of spaces
    a = sample("<f4", (4,), 46)
    put("npy_header_1gib.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 30) + descr_header(a).encode() + a.tobytes())
    case("npy_header_1gib.npy", "npy", "version 2.0 header length of 1 GiB in a 100-byte file", "refused-as-peer", "tensorfile.ErrFormat")
    h = descr_header(a)
    h += " " * ((256 << 20) - 10 - len(h) - 1) + "\n"
    put("npy_header_256mib.npy", npy_bytes(h, a.tobytes(), (2, 0)))
    case("npy_header_256mib.npy", "npy", "a 256 MiB header, padded with spaces", "refused-as-peer", "tensorfile.ErrFormat")

    # .npz: np.savez (stored, unaligned), np.savez_compressed (deflate),
    # zipfile's bzip2 and LZMA
    arrays = {f"m_{np.dtype(descr).name}": sample(descr, (3, 1 + i % 4), 100 + i) for i, descr in enumerate(peers.NPY_DTYPES)}
    arrays["fortran"] = np.asfortranarray(sample("<f4", (3, 4), 130))
    arrays["scalar"] = sample("<u2", (), 131)
    np.savez(p("npz_stored.npz"), **arrays)
    case("npz_stored.npz", "npz", "np.savez of every dtype (stored members, most misaligned)")
    np.savez_compressed(p("npz_deflated.npz"), **arrays)
    case("npz_deflated.npz", "npz", "np.savez_compressed of every dtype (deflated members)")
    for method, mname in [(zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")]:
        name = f"npz_{mname}.npz"
        with zipfile.ZipFile(p(name), "w", compression=method) as z:
            for k, v in list(arrays.items())[:6]:
                with z.open(k + ".npy", "w") as m:
                    np.lib.format.write_array(m, v)
        case(name, "npz", f"zipfile.ZIP_{mname.upper()} members written by np.lib.format.write_array")
    # a member named in CP437 without the UTF-8 flag: "\x82.npy" is é.npy
    np.savez(p("npz_cp437.npz"), X=sample("<i4", (3,), 140))
    with open(p("npz_cp437.npz"), "rb") as f:
        put("npz_cp437.npz", patch_zip_name(f.read(), b"X.npy", b"\x82.npy"))
    case("npz_cp437.npz", "npz", "member name \\x82.npy (é in CP437), UTF-8 flag clear")
    # the local header names another member than the central directory
    np.savez(p("npz_local_name.npz"), a=sample("<i4", (3,), 141))
    with open(p("npz_local_name.npz"), "rb") as f:
        raw = f.read()
    i = raw.index(b"a.npy")  # the local header's name comes first
    put("npz_local_name.npz", raw[:i] + b"z.npy" + raw[i + 5:])
    case("npz_local_name.npz", "npz", "local header names z.npy, the central directory a.npy", "refused-as-peer", "tensorfile.ErrFormat")
    # a flipped byte in a member's data: stored and mapped (uint8, aligned
    # at any offset), stored and copied (float64, misaligned), deflated
    for name, arr, kw, what in [
            ("npz_crc_stored_mapped.npz", sample("|u1", (64,), 150), {}, "stored uint8 member (mapped)"),
            ("npz_crc_stored_copied.npz", sample("<f8", (16,), 151), {}, "stored float64 member (misaligned, copied)"),
            ("npz_crc_deflated.npz", sample("|u1", (4096,), 152), {"compressed": True}, "deflated uint8 member")]:
        (np.savez_compressed if kw else np.savez)(p(name), a=arr)
        with open(p(name), "rb") as f:
            raw = f.read()
        if kw:
            # random bytes do not compress: deflate keeps them in a stored
            # block, where a flip three quarters in changes a value, not
            # the stream's structure
            with zipfile.ZipFile(p(name)) as z:
                size = z.getinfo("a.npy").compress_size
            b = bytearray(raw)
            nl, xl = struct.unpack("<HH", b[26:30])
            b[30 + nl + xl + size * 3 // 4] ^= 0x10
            put(name, bytes(b))
        else:
            put(name, flip_member_data(raw))
        case(name, "npz", f"one bit flipped in the data of a {what}", "refused-as-peer", "tensorfile.ErrChecksum")

    # safetensors: every dtype (ml_dtypes' float8 types included), metadata
    tensors = {}
    for i, dt in enumerate(peers.ST_DTYPES):
        n = np.dtype(dt).name
        tensors[f"t.{n}"] = sample(dt, (2, 1 + i % 3), 200 + i)
        tensors[f"s.{n}"] = sample(dt, (), 230 + i)
    tensors["e.float32"] = np.zeros((0, 2), np.float32)
    safetensors.numpy.save_file(tensors, p("st_all.safetensors"), metadata={"format": "np", "note": "ünïcode ✓"})
    case("st_all.safetensors", "safetensors", "safetensors.numpy.save_file of every dtype, 0-d and empty tensors, metadata")
    safetensors.numpy.save_file({"a": sample(ml_dtypes.float8_e4m3fnuz, (4, 2), 260),
                                 "b": sample(ml_dtypes.float8_e5m2fnuz, (3,), 261)}, p("st_fnuz.safetensors"))
    case("st_fnuz.safetensors", "safetensors", "F8_E4M3FNUZ and F8_E5M2FNUZ tensors")
    safetensors.numpy.save_file({"aXXXXXX": sample("<f4", (2,), 262)}, p("st_surrogate.safetensors"))
    with open(p("st_surrogate.safetensors"), "rb") as f:
        raw = f.read()
    put("st_surrogate.safetensors", raw.replace(b'"aXXXXXX"', b'"a\\ud800"', 1))
    case("st_surrogate.safetensors", "safetensors", "tensor name with a lone surrogate escape, \"a\\ud800\"", "refused-as-peer", "tensorfile.ErrFormat")

    # Arrow IPC: one row of fixed_shape_tensor columns, a table with a
    # string column, two batches, feather's lz4 (its default) and zstd
    cols, names = [], []
    for i, (n, typ) in enumerate(peers.ARROW_DTYPES.items()):
        cols.append(peers.fst_column(sample(typ.to_pandas_dtype(), (1, 2, 1 + i % 3), 300 + i)))
        names.append(f"t_{n}")
    table = pa.table(cols, names=names).replace_schema_metadata({"source": "pyarrow"})
    peers.write_arrow(p("arrow_row.arrow"), table)
    case("arrow_row.arrow", "arrow", "one row of fixed_shape_tensor columns of every number type, schema metadata")
    table = pa.table({
        "images": peers.fst_column(sample(np.uint8, (4, 2, 2), 320)),
        "label": pa.array(sample(np.int64, (4,), 321)),
        "score": pa.array(sample(np.float16, (4,), 322)),
        "text": pa.array(["a", "b", "c", "d"]),
    })
    peers.write_arrow(p("arrow_table.arrow"), table)
    case("arrow_table.arrow", "arrow", "four rows: tensors, numbers and a string column (skipped)")
    pa.feather.write_feather(table, p("arrow_feather_lz4.arrow"))
    case("arrow_feather_lz4.arrow", "arrow", "feather.write_feather's default: lz4 compression")
    pa.feather.write_feather(table, p("arrow_feather_zstd.arrow"), compression="zstd")
    case("arrow_feather_zstd.arrow", "arrow", "feather.write_feather with zstd compression")
    # feather's lz4 file with a buffer that does not decompress: its
    # first LZ4 frame's length prefix lying, or the frame's header broken
    with open(p("arrow_feather_lz4.arrow"), "rb") as f:
        lz4 = f.read()
    at = lz4.index(b"\x04\x22\x4d\x18")  # the first LZ4 frame's magic
    n = struct.unpack("<q", lz4[at - 8:at])[0]
    put("arrow_lz4_length.arrow", lz4[:at - 8] + struct.pack("<q", n - 8) + lz4[at:])
    case("arrow_lz4_length.arrow", "arrow", f"feather's lz4 file, a buffer's uncompressed length prefix {n - 8} instead of {n}",
         "refused-as-peer", "dlarrow.ErrFormat")
    put("arrow_lz4_frame.arrow", lz4[:at + 4] + bytes([lz4[at + 4] ^ 0x80]) + lz4[at + 5:])
    case("arrow_lz4_frame.arrow", "arrow", "feather's lz4 file, an LZ4 frame of an unknown version (FLG byte flipped)",
         "refused-as-peer", "dlarrow.ErrFormat")
    table = pa.table({"x": pa.array(sample(np.int32, (6,), 330)), "v": peers.fst_column(sample(np.float64, (6, 2), 331))})
    peers.write_arrow(p("arrow_batches.arrow"), table, batch_rows=3)
    case("arrow_batches.arrow", "arrow", "two record batches")
    # the stream of a float32 file under the footer of a uint32 one: the
    # same layout, the schemas disagree
    v = sample(np.uint32, (4,), 340)
    peers.write_arrow(p("arrow_u32.tmp"), pa.table({"v": pa.array(v)}))
    peers.write_arrow(p("arrow_f32.tmp"), pa.table({"v": pa.array(v.view(np.float32))}))
    with open(p("arrow_u32.tmp"), "rb") as f:
        u32 = f.read()
    with open(p("arrow_f32.tmp"), "rb") as f:
        f32 = f.read()
    os.remove(p("arrow_u32.tmp"))
    os.remove(p("arrow_f32.tmp"))
    footer = lambda b: len(b) - 10 - struct.unpack("<I", b[-10:-6])[0]  # noqa: E731
    assert len(u32) == len(f32) and footer(u32) == footer(f32)
    put("arrow_footer_schema.arrow", f32[:footer(f32)] + u32[footer(u32):])
    case("arrow_footer_schema.arrow", "arrow", "footer schema uint32, stream schema float32", "refused-peer-reads", "dlarrow.ErrFormat",
         "pyarrow's file reader follows the footer, its stream reader the stream: reading either gives values the other does not")

    got = read([os.path.join(d, c["file"]) for c in cases])
    for c in cases:
        c["peer"] = got[os.path.join(d, c["file"])]

    # small valid files of each format for the flipped-byte sweeps
    sweep = ["sweep.npy", "sweep_stored.npz", "sweep_deflated.npz", "sweep.safetensors", "sweep.arrow", "sweep_lz4.arrow"]
    small = {"a": sample("|u1", (4,), 400), "b": sample("<f4", (2, 3), 401)}
    np.save(p("sweep.npy"), small["b"])
    np.savez(p("sweep_stored.npz"), **small)
    np.savez_compressed(p("sweep_deflated.npz"), **small)
    safetensors.numpy.save_file(small, p("sweep.safetensors"), metadata={"k": "v"})
    table = pa.table({"t": peers.fst_column(sample(np.int16, (2, 3), 402)), "x": pa.array(sample(np.float32, (2,), 403))})
    peers.write_arrow(p("sweep.arrow"), table)
    pa.feather.write_feather(table, p("sweep_lz4.arrow"))

    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump({"files": cases, "sweep": sweep}, f, indent=1, ensure_ascii=False)


def read(paths):
    # NumPy warns about Python 2 headers, which it reads
    warnings.simplefilter("ignore")
    out = {}
    for path in paths:
        try:
            out[path] = {"reads": peers.read_one(path)}
        except Exception as e:  # what the reference reader raises is the point
            msg = str(e)
            if len(msg) > 200:
                msg = msg[:200] + "..."
            out[path] = {"raises": f"{type(e).__name__}: {msg}"}
    return out


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        print(json.dumps(read(sys.stdin.read().split("\n")), ensure_ascii=False))
