"""Writes the ONNX models the dlonnx tests run into the folder given as the
first argument, made with the onnx package (no file is downloaded):

  mlp_float32.onnx, mlp_float16.onnx  Y = Relu(X @ W + B), X [4, 8], W [8, 3], B [3]
  relu_float32.onnx                   Y = Relu(X), X [n] (any length)
  identity_<type>.onnx                Y = Identity(X), X [n], one per element type
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

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


def main(out):
    os.makedirs(out, exist_ok=True)
    save(mlp(TensorProto.FLOAT), os.path.join(out, "mlp_float32.onnx"))
    save(mlp(TensorProto.FLOAT16), os.path.join(out, "mlp_float16.onnx"))
    save(unary("Relu", TensorProto.FLOAT), os.path.join(out, "relu_float32.onnx"))
    for name, elem in TYPES.items():
        save(unary("Identity", elem), os.path.join(out, f"identity_{name}.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
