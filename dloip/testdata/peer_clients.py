"""The Python clients of the protocol against a dloip Go server serving
"echo" (a Dynamic model: every input back as an output of the same name,
whatever its datatype and shape) and "listed" (an FP32 [-1, 4] input):
kserve's InferenceGRPCClient and tritonclient.grpc's InferenceServerClient.
Each sends every datatype it has, at several shapes (rank 0, zero-size,
1 MiB), random bit patterns (NaN payloads included), and text (BYTES:
empty, ASCII, UTF-8, binary with zeros, 1 MiB), and requires the outputs
to be the inputs bit for bit. Prints one line of counts per client.

usage: python peer_clients.py kserve|triton HOST:PORT TOKEN CA_PEM_FILE
"""
import asyncio
import sys

import ml_dtypes
import numpy as np

SHAPES = [(), (0,), (7,), (3, 0, 2), (2, 3, 4), (256, 1024)]
KSERVE = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"]
TRITON = KSERVE + ["BF16"]
NP = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
      "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
      "FP32": np.float32, "FP64": np.float64, "BF16": ml_dtypes.bfloat16}


def random_array(rng, datatype, shape):
    dt = np.dtype(NP[datatype])
    n = int(np.prod(shape, dtype=np.int64))
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


TEXT = [b"", b"hello", "h\u00e9llo, \u4e16\u754c \U0001f600".encode(), b"\x00\x01\xff\x00", b"x" * (1 << 20)]
TEXT_SHAPES = [(0,), (1,), (5,), (2, 3)]


def text_cases():
    for shape in TEXT_SHAPES:
        n = int(np.prod(shape, dtype=np.int64))
        a = np.array([TEXT[i % len(TEXT)] for i in range(n)], dtype=np.object_).reshape(shape)
        yield "BYTES", shape, a


def same_text(a, b):
    return a.shape == b.shape and all(bytes(x) == bytes(y) for x, y in zip(a.reshape(-1), b.reshape(-1)))


def cases():
    rng = np.random.default_rng(7)
    for shape in SHAPES:
        for dt in (TRITON if sys.argv[1] == "triton" else KSERVE):
            yield dt, shape, random_array(rng, dt, shape)
    yield from text_cases()


async def run_kserve(addr, token, ca):
    from kserve import InferenceGRPCClient
    from kserve.protocol.infer_type import InferInput, InferRequest

    client = InferenceGRPCClient(addr, use_ssl=True, root_certificates=ca,
                                 channel_args=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20),
                                               ("grpc.ssl_target_name_override", "localhost")])
    headers = (("authorization", "Bearer " + token),)
    n = 0
    for dt, shape, a in cases():
        inp = InferInput(name="x_" + dt, shape=list(shape), datatype=dt)
        inp.set_data_from_numpy(a, binary_data=True)
        resp = await client.infer(InferRequest(model_name="echo", infer_inputs=[inp], request_id=f"{dt}{shape}"), headers=headers)
        out = resp.outputs[0].as_numpy()
        same = same_text if dt == "BYTES" else same_bits
        if not same(out.reshape(shape), a) or resp.id != f"{dt}{shape}" or resp.outputs[0].datatype != dt:
            sys.exit(f"kserve client: {dt} {shape}: the output differs from the input")
        n += 1
    await client.close()
    print(f"kserve InferenceGRPCClient -> dloip server: {n} tensors ({len(KSERVE)} datatypes x {len(SHAPES)} shapes, "
          f"BYTES text at {len(TEXT_SHAPES)} shapes) bit for bit, one Dynamic model")


def run_triton(addr, token, ca):
    import tritonclient.grpc as grpcclient

    with open(ca, "rb") as f:
        root = f.read()
    client = grpcclient.InferenceServerClient(addr, ssl=True, root_certificates=ca,
                                              channel_args=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20),
                                                            ("grpc.ssl_target_name_override", "localhost")])
    del root
    headers = {"authorization": "Bearer " + token}
    if not client.is_server_live(headers=headers) or not client.is_model_ready("echo", headers=headers):
        sys.exit("tritonclient: the server is not live or echo not ready")
    meta = client.get_model_metadata("listed", headers=headers)
    if meta.name != "listed" or meta.inputs[0].datatype != "FP32" or list(meta.inputs[0].shape) != [-1, 4]:
        sys.exit(f"tritonclient: metadata {meta}")
    # an unknown model: NOT_FOUND, as kserve answers
    try:
        client.is_model_ready("nope", headers=headers)
        sys.exit("tritonclient: an unknown model is ready")
    except grpcclient.InferenceServerException as e:
        if e.status() != "StatusCode.NOT_FOUND":
            sys.exit(f"tritonclient: an unknown model: {e.status()}")
    n = 0
    for dt, shape, a in cases():
        inp = grpcclient.InferInput("x_" + dt, list(shape), dt)
        inp.set_data_from_numpy(a)
        res = client.infer("echo", [inp], outputs=[grpcclient.InferRequestedOutput("x_" + dt)], request_id=f"{dt}{shape}", headers=headers)
        out = res.as_numpy("x_" + dt)
        same = same_text if dt == "BYTES" else same_bits
        if not same(out.reshape(shape), a) or res.get_response().id != f"{dt}{shape}" or res.get_output("x_" + dt).datatype != dt:
            sys.exit(f"tritonclient: {dt} {shape}: the output differs from the input")
        n += 1
    client.close()
    print(f"tritonclient.grpc -> dloip server: {n} tensors ({len(TRITON)} datatypes x {len(SHAPES)} shapes, "
          f"BYTES text at {len(TEXT_SHAPES)} shapes) bit for bit, one Dynamic model")


if __name__ == "__main__":
    peer, addr, token, ca = sys.argv[1:5]
    if peer == "kserve":
        asyncio.run(run_kserve(addr, token, ca))
    else:
        run_triton(addr, token, ca)
