"""A PNG file decoded by Go's image/png and handed to NumPy without a copy,
then a NumPy array handed to Go as an image and encoded by Go. Run with
`make images` (it builds the bridges' library, ./internal/libpybridges,
and sets PYBRIDGES_LIB)."""
import gc
import os
import tempfile

import numpy as np

import goimage

with tempfile.TemporaryDirectory() as tmp:
    # NumPy -> Go: a gradient shared with Go as an *image.NRGBA, encoded by Go.
    h, w = 4, 6
    gradient = np.zeros((h, w, 4), np.uint8)
    gradient[..., 0] = np.arange(w) * 40
    gradient[..., 1] = np.arange(h)[:, None] * 60
    gradient[..., 3] = 255 - np.arange(w) * 10  # not opaque: Go writes an RGBA PNG
    path = os.path.join(tmp, "gradient.png")
    goimage.encode(gradient, path)
    print(f"NumPy {gradient.shape} -> Go image -> {os.path.basename(path)} ({os.path.getsize(path)} bytes)")

    # Go -> NumPy: decoded by Go, the image's Pix seen by NumPy, no copy.
    img = goimage.load(path)
    a = np.from_dlpack(img.pixels())
    shared = a.__array_interface__["data"][0] == img.pixel_address
    print(f"Go {img.go_type} -> NumPy {a.dtype} {a.shape}, strides {a.strides}, Go's memory: {shared}")
    print(f"  pixel (1, 2) = {a[1, 2].tolist()}, same as the source: {np.array_equal(a, gradient)}")

    # A sub-image: the parent's memory at an offset, with its row stride.
    s = np.from_dlpack(img.sub_image(2, 1, 5, 3).pixels())
    print(f"sub-image (2,1)-(5,3) -> NumPy {s.shape}, strides {s.strides}, equal: {np.array_equal(s, gradient[1:3, 2:5])}")

    try:
        import PIL.Image
        print(f"Pillow decodes the same pixels: {np.array_equal(np.asarray(PIL.Image.open(path)), a)}")
    except ImportError:
        pass

    del img, a, s
    gc.collect()
    goimage.collect()
    print(f"done: outstanding exports {goimage.outstanding()}")
