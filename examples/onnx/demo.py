"""NumPy -> Go -> ONNX Runtime -> NumPy by DLPack, with no copy: run with
`make onnx-example` (builds the bridges' library libpybridges.so from Go,
./internal/libpybridges, and the virtualenv with the onnxruntime wheel,
whose libonnxruntime.so Go loads)."""
import gc
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

import goort

# A small model, made here: Y = Relu(X @ W + B).
graph = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Z"]),
     helper.make_node("Relu", ["Z"], ["Y"])],
    "demo",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 2]),
     helper.make_tensor_value_info("B", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
model.ir_version = 10

x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
w = np.array([[1, -1], [0.5, 2], [-1, 0.25]], dtype=np.float32)
b = np.array([3, 0.5], dtype=np.float32)

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "demo.onnx")
    onnx.save(model, path)
    s = goort.Session(path, ["X", "W", "B"], "Y")
    y = np.from_dlpack(s.run(x, w, b, dtype="float32", shape=(2, 2)))
    s.close()

shared = all(goort.input_address(i) == a.ctypes.data for i, a in enumerate((x, w, b)))
print("ONNX Runtime read NumPy's memory (no copy in):", shared)
print("NumPy reads the memory ONNX Runtime wrote (no copy out):", y.ctypes.data == goort.output_address())
print("Y = Relu(X @ W + B) =", y.tolist())
print("matches NumPy:", np.allclose(y, np.maximum(x @ w + b, 0)))
del y
gc.collect()
print(f"done: outstanding exports {goort.outstanding()}")
