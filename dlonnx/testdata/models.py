"""Writes the ONNX models the dlonnx tests run into the folder given as the
first argument, made with the onnx package (no file is downloaded):

  mlp_float32.onnx, mlp_float16.onnx  Y = Relu(X @ W + B), X [4, 8], W [8, 3], B [3]
  relu_float32.onnx                   Y = Relu(X), X [n] (any length)
  identity_<type>.onnx                Y = Identity(X), X [n], one per element type
  nonzero_float32.onnx                Y = NonZero(X), X [n]: Y [1, ?] int64
  compress_float16.onnx               Y = Compress(X, C, axis=0), X [n] float16, C [n] bool
  topk_float32.onnx                   Y, I = TopK(X, K), X [batch, n], K [1] int64 given at run time
  reshape_float32.onnx                Y = Reshape(X, S), X [n], S [2] int64 given at run time
  batch_float32.onnx                  Y = Relu(X @ W + B), X [batch, 8], W and B in the model: Y [batch, 3]
  add_float32.onnx                    Y = A + B, A and B [batch, n], named dimensions shared
  scale_float32.onnx                  Y = X * X, X [n] (the benchmark model)
  cast_fnuz.onnx                      Y, Z = Cast(X) to float8_e4m3fnuz and float8_e5m2fnuz, X [n] float32

and, next to them, cases.json: inputs and the outputs ONNX Runtime's own
Python API gives for them (InferenceSession.run), as raw little-endian
files, for the side-by-side tests of the Go session.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

OPSET = 21  # Identity takes the float8 types from opset 19
IR_VERSION = 10  # ONNX Runtime 1.24 reads IR versions up to 11

TYPES = {
    "int8": TensorProto.INT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
    "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16, "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE, "bool": TensorProto.BOOL,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e5m2": TensorProto.FLOAT8E5M2,
}


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dlonnx-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def mlp(elem):
    return helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]),
         helper.make_node("Add", ["XW", "B"], ["Z"]),
         helper.make_node("Relu", ["Z"], ["Y"])],
        "mlp",
        [helper.make_tensor_value_info("X", elem, [4, 8]),
         helper.make_tensor_value_info("W", elem, [8, 3]),
         helper.make_tensor_value_info("B", elem, [3])],
        [helper.make_tensor_value_info("Y", elem, [4, 3])])


def unary(op, elem):
    return helper.make_graph(
        [helper.make_node(op, ["X"], ["Y"])], op.lower(),
        [helper.make_tensor_value_info("X", elem, ["n"])],
        [helper.make_tensor_value_info("Y", elem, ["n"])])


def model(nodes, inputs, outputs, initializers=()):
    return helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


F, H, I64, B = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL

DYNAMIC = {
    "nonzero_float32": model([helper.make_node("NonZero", ["X"], ["Y"])], [vi("X", F, ["n"])], [vi("Y", I64, [1, None])]),
    "compress_float16": model([helper.make_node("Compress", ["X", "C"], ["Y"], axis=0)],
                              [vi("X", H, ["n"]), vi("C", B, ["n"])], [vi("Y", H, [None])]),
    "topk_float32": model([helper.make_node("TopK", ["X", "K"], ["Y", "I"], axis=1)],
                          [vi("X", F, ["batch", "n"]), vi("K", I64, [1])],
                          [vi("Y", F, ["batch", None]), vi("I", I64, ["batch", None])]),
    "reshape_float32": model([helper.make_node("Reshape", ["X", "S"], ["Y"])],
                             [vi("X", F, ["n"]), vi("S", I64, [2])], [vi("Y", F, [None, None])]),
    "batch_float32": model([helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Z"]),
                            helper.make_node("Relu", ["Z"], ["Y"])],
                           [vi("X", F, ["batch", 8])], [vi("Y", F, ["batch", 3])],
                           [numpy_helper.from_array((np.arange(24, dtype=np.float32).reshape(8, 3) % 5) * 0.25 - 0.5, "W"),
                            numpy_helper.from_array(np.array([0.5, -1, 0.25], dtype=np.float32), "B")]),
    "add_float32": model([helper.make_node("Add", ["A", "B"], ["Y"])],
                         [vi("A", F, ["batch", "n"]), vi("B", F, ["batch", "n"])], [vi("Y", F, ["batch", "n"])]),
    "cast_fnuz": model([helper.make_node("Cast", ["X"], ["Y"], to=TensorProto.FLOAT8E4M3FNUZ),
                        helper.make_node("Cast", ["X"], ["Z"], to=TensorProto.FLOAT8E5M2FNUZ)],
                       [vi("X", F, ["n"])], [vi("Y", TensorProto.FLOAT8E4M3FNUZ, ["n"]), vi("Z", TensorProto.FLOAT8E5M2FNUZ, ["n"])]),
    "scale_float32": model([helper.make_node("Mul", ["X", "X"], ["Y"])], [vi("X", F, ["n"])], [vi("Y", F, ["n"])]),
}


def cases(rng):
    """Inputs for each dynamic model, several per model so that the
    data-dependent output shapes differ from run to run."""
    for n in (0, 1, 7, 100):
        x = rng.standard_normal(n).astype(np.float32)
        x[rng.random(n) < 0.5] = 0
        yield "nonzero_float32", {"X": x}
    for n in (5, 64):
        yield "compress_float16", {"X": rng.standard_normal(n).astype(np.float16), "C": rng.random(n) < 0.4}
    for k in (1, 3, 10):
        yield "topk_float32", {"X": rng.standard_normal((2, 10)).astype(np.float32), "K": np.array([k], dtype=np.int64)}
    for shape in ((2, 6), (3, 4), (12, 1), (-1, 2)):
        yield "reshape_float32", {"X": rng.standard_normal(12).astype(np.float32), "S": np.array(shape, dtype=np.int64)}
    for batch in (1, 5, 33):
        yield "batch_float32", {"X": rng.standard_normal((batch, 8)).astype(np.float32)}
    yield "add_float32", {"A": rng.standard_normal((3, 4)).astype(np.float32), "B": rng.standard_normal((3, 4)).astype(np.float32)}


def write_cases(out):
    rng = np.random.default_rng(7)
    manifest = []
    for i, (name, feeds) in enumerate(cases(rng)):
        sess = onnxruntime.InferenceSession(os.path.join(out, name + ".onnx"), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        results = sess.run(names, feeds)

        def entry(key, a, j, kind):
            path = f"case{i}_{kind}{j}.bin"
            np.ascontiguousarray(a).tofile(os.path.join(out, path))
            return {"name": key, "dtype": str(a.dtype), "shape": list(a.shape), "file": path}

        manifest.append({"model": name + ".onnx",
                         "inputs": [entry(k, v, j, "in") for j, (k, v) in enumerate(feeds.items())],
                         "outputs": [entry(k, v, j, "out") for j, (k, v) in enumerate(zip(names, results))]})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def main(out):
    os.makedirs(out, exist_ok=True)
    save(mlp(TensorProto.FLOAT), os.path.join(out, "mlp_float32.onnx"))
    save(mlp(TensorProto.FLOAT16), os.path.join(out, "mlp_float16.onnx"))
    save(unary("Relu", TensorProto.FLOAT), os.path.join(out, "relu_float32.onnx"))
    for name, elem in TYPES.items():
        save(unary("Identity", elem), os.path.join(out, f"identity_{name}.onnx"))
    for name, graph in DYNAMIC.items():
        save(graph, os.path.join(out, name + ".onnx"))
    write_cases(out)


if __name__ == "__main__":
    main(sys.argv[1])
