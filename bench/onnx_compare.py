"""ONNX Runtime's Python API on the model and inputs of dlonnx's
BenchmarkFreshOutput: Y = X * X (scale_float32.onnx, written by
dlonnx/testdata/models.py) on float32 inputs of n, n-16, n-32 and n-48
elements in turn, so every run's output has a new shape. Prints one line
per path and size: "<path>/<size> <median ns per run>".

  sess.run   InferenceSession.run(["Y"], {"X": x}): the result as a NumPy array
  iobinding  bind_cpu_input + bind_output("Y") left to ONNX Runtime,
             run_with_iobinding, the output taken as an OrtValue (no copy)
"""
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime

SIZES = [("4KiB", 1 << 10), ("64MiB", 1 << 24)]


def measure(fn, iters, repeats):
    fn()  # warm-up: the arena grows to its size
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for i in range(iters):
            fn()
        out.append((time.perf_counter_ns() - t0) / iters)
    return statistics.median(out)


def main(models, repeats):
    sess = onnxruntime.InferenceSession(os.path.join(models, "scale_float32.onnx"), providers=["CPUExecutionProvider"])
    for name, n in SIZES:
        xs = [(np.arange(n - 16 * k, dtype=np.float32) % 7) - 3 for k in range(4)]
        iters = 20000 if n < 1 << 20 else 20
        state = {"i": 0}

        def run():
            x = xs[state["i"] % 4]
            state["i"] += 1
            y = sess.run(["Y"], {"X": x})[0]
            assert y.shape == x.shape

        binding = sess.io_binding()

        def iobinding():
            x = xs[state["i"] % 4]
            state["i"] += 1
            binding.bind_cpu_input("X", x)
            binding.bind_output("Y")
            sess.run_with_iobinding(binding)
            y = binding.get_outputs()[0]
            assert y.shape() == list(x.shape)
            binding.clear_binding_outputs()

        print(f"sess.run/{name} {measure(run, iters, repeats):.0f}")
        print(f"iobinding/{name} {measure(iobinding, iters, repeats):.0f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
