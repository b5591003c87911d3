"""PNG files decoded and encoded by Go's image/png, exchanged with NumPy
through DLPack and libpybridges (the C shared library built from Go for
the bridges' Python tests, ./internal/libpybridges; $PYBRIDGES_LIB, by
default .build/libpybridges.so at the top of the repository).

    img = goimage.load("photo.png")        # decoded by Go
    a = np.from_dlpack(img.pixels())        # the Go image's memory, no copy
    goimage.encode(a, "out.png")            # a NumPy array as a Go image, encoded by Go
"""
import ctypes
import os

_lib = ctypes.PyDLL(os.environ.get("PYBRIDGES_LIB", os.path.join(os.path.dirname(__file__), "..", "..", ".build", "libpybridges.so")))
_lib.pybridges_init.restype = ctypes.c_int
_lib.dlimage_load.restype = ctypes.c_int64
_lib.dlimage_load.argtypes = [ctypes.c_char_p]
_lib.dlimage_sub.restype = ctypes.c_int64
_lib.dlimage_sub.argtypes = [ctypes.c_int64] + [ctypes.c_int] * 4
_lib.dlimage_type.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
_lib.dlimage_pixel_addr.restype = ctypes.c_size_t
_lib.dlimage_pixel_addr.argtypes = [ctypes.c_int64]
_lib.pybridges_free.argtypes = [ctypes.c_int64]
_lib.dlimage_dlpack.restype = ctypes.py_object  # a new reference, or NULL with an exception set
_lib.dlimage_dlpack.argtypes = [ctypes.c_int64, ctypes.c_int] + [ctypes.py_object] * 4
_lib.dlimage_encode.restype = ctypes.c_int
_lib.dlimage_encode.argtypes = [ctypes.py_object, ctypes.c_int, ctypes.c_char_p]
_lib.pybridges_outstanding.restype = ctypes.c_int64
if _lib.pybridges_init() != 0:
    raise ImportError("libpybridges: CPython C API not found in this process")

KDLCPU = 1
PIXELS, COPY16, PALETTE, Y, CB, CR = range(6)


class Export:
    """One DLPack export of a Go image (what: PIXELS, COPY16, PALETTE, Y,
    CB or CR), for np.from_dlpack and any other DLPack consumer."""

    def __init__(self, image, what):
        self._image, self._what = image, what

    def __dlpack_device__(self):
        return (KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _lib.dlimage_dlpack(self._image._id, self._what, stream, max_version, dl_device, copy)


class Image:
    """An image held by Go (an image.Image)."""

    def __init__(self, id_):
        self._id = id_

    def __del__(self):
        _lib.pybridges_free(self._id)

    @property
    def go_type(self):
        buf = ctypes.create_string_buffer(64)
        _lib.dlimage_type(self._id, buf, 64)
        return buf.value.decode()

    @property
    def pixel_address(self):
        """Address of the first sample, as Go sees it."""
        return _lib.dlimage_pixel_addr(self._id)

    def sub_image(self, x0, y0, x1, y1):
        """img.SubImage(image.Rect(x0, y0, x1, y1)): shares the pixels."""
        return Image(_lib.dlimage_sub(self._id, x0, y0, x1, y1))

    def pixels(self):
        """The 8-bit samples, zero copy (dlimage.FromImage)."""
        return Export(self, PIXELS)

    def copy16(self):
        """The 16-bit samples as a native uint16 copy (dlimage.CopyFrom*64/16)."""
        return Export(self, COPY16)

    def palette(self):
        """The palette of a paletted image, (N, 4) non-premultiplied RGBA."""
        return Export(self, PALETTE)

    def planes(self):
        """Y, Cb and Cr of a YCbCr image, each its own zero-copy tensor."""
        return Export(self, Y), Export(self, CB), Export(self, CR)


def load(path):
    """Decodes a PNG file with Go's image/png."""
    return Image(_lib.dlimage_load(os.fsencode(path)))


GRAY, NRGBA, RGBA, COPY_HWC, COPY_CHW, COPY_GRAY = range(6)


def encode(array, path, as_=None):
    """Hands array to Go as an image (dlimage.ToGray or ToNRGBA, sharing its
    memory, by default by its rank; or as_) and writes it with image/png."""
    if as_ is None:
        as_ = GRAY if array.ndim == 2 else NRGBA
    capsule = array.__dlpack__(max_version=(1, 3))
    _lib.dlimage_encode(capsule, as_, os.fsencode(path))


def collect():
    """Runs Go's garbage collector (images that took a tensor over release it)."""
    _lib.pybridges_collect()


def outstanding():
    """Go exports not yet released by their consumers."""
    return _lib.pybridges_outstanding()
