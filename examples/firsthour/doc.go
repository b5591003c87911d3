// Package firsthour is the "first hour" as a throw-away module:
// three programs a new user writes from the README and docs/ alone, run by
// check.sh (make firsthour) in an empty module outside the repository,
// copied there once the README's "Depending on it" lines have given it
// its requirements:
//
//   - st2c: a safetensors file (written by Python's safetensors) to C,
//     mapped and handed over without a copy;
//   - flight: a Go tensor served by dlflight to a pyarrow.flight client
//     (the snippet of docs/beyond-one-process.md);
//   - topy: an image and a gonum matrix to NumPy through the Python
//     loader cmd/dlpack-python writes (docs/python.md).
package firsthour
