"""The Python side of the oiponnx example: kserve's InferenceGRPCClient
asks the Go service whether it and its model are ready, then runs it on a batch of
5, and prints the input and output bytes for the Go side's check.

usage: python client.py HOST:PORT
"""
import asyncio
import sys

import numpy as np
from kserve import InferenceGRPCClient
from kserve.protocol.infer_type import InferInput, InferRequest


async def main(addr):
    client = InferenceGRPCClient(addr)
    live, ready = await client.is_server_live(), await client.is_model_ready("mlp")
    print(f"kserve client: server live {live}, model mlp ready {ready}")
    if not (live and ready):
        sys.exit("the Go service is not ready")
    x = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    inp = InferInput(name="X", shape=list(x.shape), datatype="FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    resp = await client.infer(InferRequest(model_name="mlp", infer_inputs=[inp], request_id="example-1"))
    y = resp.outputs[0].as_numpy()
    print(f"kserve client: {resp.outputs[0].name} {y.dtype} {list(y.shape)}, id {resp.id}")
    print("x:", x.tobytes().hex())
    print("y:", y.tobytes().hex())
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
