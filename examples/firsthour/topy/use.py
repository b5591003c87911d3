"""NumPy takes the image and the matrix through the generated loader
(topy.py), as docs/python.md shows."""
import gc

import numpy as np
import topy

img = topy.tensor(topy.lib.topy_image)
a = np.from_dlpack(img)  # (H, W, 4) uint8, Go's Pix, no copy
want = np.zeros((2, 3, 4), np.uint8)
for y in range(2):
    for x in range(3):
        want[y, x] = (10 * y + x, 100, 200, 255)
assert a.shape == (2, 3, 4) and a.dtype == np.uint8 and np.array_equal(a, want), a

m = topy.tensor(topy.lib.topy_matrix)
b = np.from_dlpack(m)  # (2, 3) float64, the matrix's memory
assert np.array_equal(b, np.array([[1, 2, 3], [4, 5, 6]], np.float64)), b
print("numpy: image", a.shape, a.dtype, "and matrix", b.shape, b.dtype, "as Go holds them")

del a, b
img.close()
m.close()
gc.collect()
assert topy.live() == 0 and topy.outstanding() == 0, (topy.live(), topy.outstanding())
print("done: outstanding exports", topy.outstanding())
