"""Go's image/png against Pillow, through DLPack: PNG files decoded by Go
and handed to NumPy without a copy equal, bit for bit, what Pillow decodes
from the same files; NumPy arrays taken by Go as images and encoded by Go
decode in Pillow to the same arrays. The files are made here, by Pillow or,
for 16-bit colour (which Pillow cannot write), by a few lines of zlib."""
import gc
import struct
import sys
import zlib

import numpy as np
import PIL
import PIL.Image
import pytest

import goimage


def test_pillow_is_the_pinned_one():
    assert PIL.__version__ == "13.0.0"


def rng_image(shape, seed, dtype=np.uint8):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(0, info.max + 1, size=shape, dtype=dtype)


def from_go(img, export="pixels"):
    """The Go image's export as a NumPy array (np.from_dlpack: versioned)."""
    return np.from_dlpack(getattr(img, export)())


def pillow(path):
    return np.asarray(PIL.Image.open(path))


def address(a):
    return a.__array_interface__["data"][0]


def write_png16(path, arr):
    """A 16-bit truecolour PNG of arr (H, W, 3 or 4) uint16."""
    h, w, c = arr.shape

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 16, {3: 2, 4: 6}[c], 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


# 8-bit files Pillow writes: (name, Pillow mode, array, Go type).
EIGHT_BIT = [
    ("gray", "L", rng_image((5, 7), 1), "*image.Gray"),
    ("gray-1x1", "L", rng_image((1, 1), 2), "*image.Gray"),
    ("rgba", "RGBA", rng_image((3, 13, 4), 3), "*image.NRGBA"),
    ("rgb", "RGB", rng_image((4, 9, 3), 4), "*image.RGBA"),
    ("gray-alpha", "LA", rng_image((6, 11, 2), 5), "*image.NRGBA"),
]


@pytest.mark.parametrize("name,mode,array,go_type", EIGHT_BIT, ids=[c[0] for c in EIGHT_BIT])
def test_eight_bit_files_equal_pillow(tmp_path, name, mode, array, go_type):
    path = tmp_path / f"{name}.png"
    PIL.Image.fromarray(array, mode).save(path)
    expected = pillow(path)
    img = goimage.load(path)
    assert img.go_type == go_type
    a = from_go(img)
    assert a.dtype == np.uint8
    assert address(a) == img.pixel_address, "Go's memory, not a copy"
    if mode in ("L",):
        np.testing.assert_array_equal(a, expected)
    elif mode == "RGBA":
        np.testing.assert_array_equal(a, expected)
    elif mode == "RGB":  # Go: RGBA with an opaque alpha
        np.testing.assert_array_equal(a[..., :3], expected)
        assert (a[..., 3] == 255).all()
    elif mode == "LA":  # Go: NRGBA with the gray in R, G and B
        for ch in range(3):
            np.testing.assert_array_equal(a[..., ch], expected[..., 0])
        np.testing.assert_array_equal(a[..., 3], expected[..., 1])
    # A write through NumPy is a write to the Go image.
    a[-1, -1] = 77
    assert (from_go(img)[-1, -1] == 77).all()


def test_one_bit_gray_with_an_odd_width(tmp_path):
    bits = rng_image((3, 13), 6) > 127
    path = tmp_path / "bits.png"
    PIL.Image.fromarray(bits).save(path)  # mode "1": a 1-bit PNG
    img = goimage.load(path)
    assert img.go_type == "*image.Gray"
    np.testing.assert_array_equal(from_go(img), pillow(path).astype(np.uint8) * 255)


@pytest.mark.parametrize("colours,width", [(4, 7), (200, 13)])  # Pillow writes 2-bit and 8-bit indices
def test_palette_files_equal_pillow(tmp_path, colours, width):
    indices = (rng_image((5, width), 7) % colours).astype(np.uint8)
    palette = rng_image((colours, 3), 8)
    im = PIL.Image.fromarray(indices, "P")
    im.putpalette(palette.flatten().tolist())
    path = tmp_path / "palette.png"
    alpha = rng_image((colours,), 9)
    im.save(path, transparency=alpha.tobytes())  # a tRNS chunk
    img = goimage.load(path)
    assert img.go_type == "*image.Paletted"
    a = from_go(img)
    assert address(a) == img.pixel_address
    np.testing.assert_array_equal(a, pillow(path))
    pim = PIL.Image.open(path)
    pil_rgb = np.array(pim.getpalette(), dtype=np.uint8).reshape(-1, 3)
    pil_alpha = np.frombuffer(pim.info["transparency"], dtype=np.uint8)
    go_palette = from_go(img, "palette")
    assert go_palette.shape == (colours, 4)
    np.testing.assert_array_equal(go_palette[:, :3], pil_rgb[:colours])
    np.testing.assert_array_equal(go_palette[:, 3], pil_alpha[:colours])


def test_sixteen_bit_gray_equals_pillow(tmp_path):
    values = rng_image((5, 9), 10, np.uint16)
    path = tmp_path / "gray16.png"
    PIL.Image.fromarray(values).save(path)  # mode "I;16"
    img = goimage.load(path)
    assert img.go_type == "*image.Gray16"
    with pytest.raises(BufferError, match="big-endian"):
        from_go(img)  # never a silent conversion
    a = from_go(img, "copy16")
    assert a.dtype == np.uint16 and a.shape == (5, 9)
    np.testing.assert_array_equal(a, pillow(path))
    np.testing.assert_array_equal(a, values)


@pytest.mark.parametrize("channels,go_type", [(4, "*image.NRGBA64"), (3, "*image.RGBA64")])
def test_sixteen_bit_colour(tmp_path, channels, go_type):
    values = rng_image((3, 7, channels), 11, np.uint16)
    path = tmp_path / "colour16.png"
    write_png16(path, values)
    img = goimage.load(path)
    assert img.go_type == go_type
    with pytest.raises(BufferError, match="big-endian"):
        from_go(img)
    a = from_go(img, "copy16")
    assert a.dtype == np.uint16 and a.shape == (3, 7, 4)
    np.testing.assert_array_equal(a[..., :channels], values)  # every bit of the file
    if channels == 3:
        assert (a[..., 3] == 0xFFFF).all()
    # Pillow keeps 8 bits of 16-bit colour: the high byte of each sample.
    np.testing.assert_array_equal(a[..., :channels] >> 8, pillow(path)[..., :channels])


def test_sub_images_share_the_parent(tmp_path):
    rgba = rng_image((6, 11, 4), 12)
    path = tmp_path / "rgba.png"
    PIL.Image.fromarray(rgba, "RGBA").save(path)
    expected = pillow(path)
    img = goimage.load(path)
    sub = img.sub_image(2, 1, 9, 4)
    a = from_go(sub)
    assert a.shape == (3, 7, 4)
    assert a.strides == (11 * 4, 4, 1), "the parent's row stride"
    assert address(a) == sub.pixel_address == img.pixel_address + (1 * 11 + 2) * 4
    np.testing.assert_array_equal(a, expected[1:4, 2:9])
    # Gray, at an odd corner.
    gpath = tmp_path / "gray.png"
    PIL.Image.fromarray(rgba[..., 0], "L").save(gpath)
    gsub = goimage.load(gpath).sub_image(3, 3, 10, 6)
    g = from_go(gsub)
    assert g.strides == (11, 1)
    np.testing.assert_array_equal(g, pillow(gpath)[3:6, 3:10])
    empty = from_go(img.sub_image(20, 20, 30, 30))
    assert empty.size == 0


def test_arrays_outlive_the_go_image(tmp_path):
    path = tmp_path / "gray.png"
    values = rng_image((64, 65), 13)
    PIL.Image.fromarray(values).save(path)
    a = from_go(goimage.load(path))  # the Image is dropped at once
    gc.collect()
    goimage.collect()
    junk = [bytearray(b"\xee" * 64 * 65) for _ in range(64)]
    np.testing.assert_array_equal(a, values)
    assert goimage.outstanding() == 1
    del a, junk
    assert goimage.outstanding() == 0


class LegacyOnly:
    """A consumer's view of a producer that it asks as JAX does:
    __dlpack__ with max_version=None, a legacy capsule."""

    def __init__(self, export):
        self.export = export

    def __dlpack_device__(self):
        return self.export.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        kwargs.pop("max_version", None)
        return self.export.__dlpack__(**kwargs)


def test_requests_legacy_copy_device_stream(tmp_path):
    values = rng_image((3, 5, 4), 17)
    path = tmp_path / "rgba.png"
    PIL.Image.fromarray(values, "RGBA").save(path)
    img = goimage.load(path)
    legacy = np.from_dlpack(LegacyOnly(img.pixels()))
    assert address(legacy) == img.pixel_address, "legacy capsules share too"
    np.testing.assert_array_equal(legacy, values)
    copied = np.from_dlpack(img.pixels(), copy=True)
    assert address(copied) != img.pixel_address
    np.testing.assert_array_equal(copied, values)
    copied[0, 0] = 0
    assert (legacy[0, 0] == values[0, 0]).all(), "the copy is the consumer's own"
    same = np.from_dlpack(img.pixels(), device="cpu", copy=False)
    assert address(same) == img.pixel_address
    export = img.pixels()
    with pytest.raises(BufferError, match="request.device"):
        export.__dlpack__(max_version=(1, 3), dl_device=(2, 0))
    with pytest.raises(RuntimeError, match="stream"):
        export.__dlpack__(max_version=(1, 3), stream=1)  # a CPU tensor takes only stream=None
    assert export.__dlpack__(max_version=(1, 3), stream=None) is not None  # released unconsumed
    del legacy, copied, same
    assert goimage.outstanding() == 0


# NumPy arrays into Go, written by image/png, read by Pillow.
def released(array, baseline, tries=200):
    """Waits for Go to release its hold on array (the image that took the
    tensor over is collected); returns whether it did."""
    for _ in range(tries):
        goimage.collect()
        if sys.getrefcount(array) == baseline + 1:  # + this function's own reference
            return True
    return False


@pytest.mark.parametrize("shape", [(5, 7), (3, 13, 4), (1, 1), (2, 1, 4)])
def test_numpy_array_encoded_by_go(tmp_path, shape):
    a = rng_image(shape, 14)
    baseline = sys.getrefcount(a)
    path = tmp_path / "out.png"
    goimage.encode(a, path)  # dlimage.ToGray or ToNRGBA: a's memory, no copy
    np.testing.assert_array_equal(pillow(path), a)
    assert released(a, baseline), "Go released the tensor once the image was collected"


def test_strided_rows_zero_copy_and_copies(tmp_path):
    big = rng_image((6, 15, 4), 15)
    window = big[1:5, 3:12]  # row stride 60 bytes > 9 * 4
    path = tmp_path / "window.png"
    goimage.encode(window, path, goimage.NRGBA)
    np.testing.assert_array_equal(pillow(path), window)
    opaque = big[..., :3]
    goimage.encode(np.ascontiguousarray(opaque), path, goimage.COPY_HWC)  # (H, W, 3): an explicit copy
    np.testing.assert_array_equal(pillow(path), opaque)  # alpha 255 everywhere: Go writes an RGB PNG
    chw = np.ascontiguousarray(np.moveaxis(big, 2, 0))  # (4, H, W), PyTorch's order
    goimage.encode(chw, path, goimage.COPY_CHW)
    np.testing.assert_array_equal(pillow(path), big)
    goimage.encode(big[::-1, :, 0], path, goimage.COPY_GRAY)  # negative row stride: copied
    np.testing.assert_array_equal(pillow(path), big[::-1, :, 0])


@pytest.mark.parametrize("case", ["read-only", "rgb", "chw", "transposed", "float"])
def test_go_refuses_what_an_image_cannot_share(tmp_path, case):
    a = {
        "read-only": rng_image((4, 5), 16),
        "rgb": rng_image((4, 5, 3), 16),
        "chw": rng_image((4, 5, 6), 16),
        "transposed": rng_image((5, 4), 16).T,
        "float": np.zeros((4, 5), np.float32),
    }[case]
    if case == "read-only":
        a.flags.writeable = False
    as_ = goimage.NRGBA if a.ndim == 3 else goimage.GRAY
    baseline = sys.getrefcount(a)
    with pytest.raises(BufferError) as err:
        goimage.encode(a, tmp_path / "refused.png", as_)
    message = str(err.value)
    del err  # its traceback holds encode's frame, and so the array
    assert "dl_tensor" in message or "flags" in message, "the message names the field: " + message
    assert sys.getrefcount(a) == baseline, "the refused tensor was released at once"


def test_nothing_outstanding():
    gc.collect()
    goimage.collect()
    assert goimage.outstanding() == 0
