"""Times one Python client of the protocol against a server: each call
sends one FP32 tensor and receives it back (an echo model). Prints one
line per size: "<size bytes> <median seconds>".

With "triton-parts" it times instead tritonclient's own work for one
call, apart from any network: copying the array in, building the
request, serializing it, parsing the response and as_numpy. Prints one
line per size: "<size bytes> <median seconds of the five summed> <each
of the five's median seconds>".

usage: python bench_clients.py kserve|triton|triton-parts HOST:PORT MODEL INPUT SIZE:REPS...
"""
import asyncio
import statistics
import sys
import time

import numpy as np

LIMIT = [("grpc.max_send_message_length", 512 << 20), ("grpc.max_receive_message_length", 512 << 20)]


async def kserve(addr, model, name, plan):
    from kserve import InferenceGRPCClient
    from kserve.protocol.infer_type import InferInput, InferRequest

    client = InferenceGRPCClient(addr, channel_args=list(LIMIT), timeout=600)
    for size, reps in plan:
        a = np.random.default_rng(1).random(size // 4, dtype=np.float32)
        times = []
        for i in range(reps + 2):
            t0 = time.perf_counter()
            inp = InferInput(name=name, shape=list(a.shape), datatype="FP32")
            inp.set_data_from_numpy(a, binary_data=True)
            resp = await client.infer(InferRequest(model_name=model, infer_inputs=[inp]))
            out = resp.outputs[0].as_numpy()
            times.append(time.perf_counter() - t0)
            if i == 0 and out.tobytes() != a.tobytes():
                sys.exit("kserve: the output differs")
        print(size, statistics.median(times[2:]), flush=True)
    await client.close()


def triton(addr, model, name, plan):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(addr, channel_args=list(LIMIT))
    for size, reps in plan:
        a = np.random.default_rng(1).random(size // 4, dtype=np.float32)
        times = []
        for i in range(reps + 2):
            t0 = time.perf_counter()
            inp = grpcclient.InferInput(name, list(a.shape), "FP32")
            inp.set_data_from_numpy(a)
            res = client.infer(model, [inp])
            out = res.as_numpy(name)
            times.append(time.perf_counter() - t0)
            if i == 0 and out.tobytes() != a.tobytes():
                sys.exit("tritonclient: the output differs")
        print(size, statistics.median(times[2:]), flush=True)
    client.close()


def triton_parts(addr, model, name, plan):
    import tritonclient.grpc as grpcclient
    from tritonclient.grpc import service_pb2
    # the function tritonclient.grpc.InferenceServerClient.infer builds its
    # request with (tritonclient 2.73, pinned in requirements.txt)
    from tritonclient.grpc._utils import _get_inference_request

    client = grpcclient.InferenceServerClient(addr, channel_args=list(LIMIT))
    for size, reps in plan:
        a = np.random.default_rng(1).random(size // 4, dtype=np.float32)
        inp = grpcclient.InferInput(name, list(a.shape), "FP32")
        inp.set_data_from_numpy(a)
        # one real call, for a response to parse
        wire = client.infer(model, [inp]).get_response().SerializeToString()
        parts = [[] for _ in range(5)]
        for i in range(reps + 2):
            t = [time.perf_counter()]
            inp = grpcclient.InferInput(name, list(a.shape), "FP32")
            inp.set_data_from_numpy(a)
            t.append(time.perf_counter())
            req = _get_inference_request(model, [inp], "", "", None, 0, False, False, 0, None, None)
            t.append(time.perf_counter())
            req.SerializeToString()
            t.append(time.perf_counter())
            resp = service_pb2.ModelInferResponse()
            resp.ParseFromString(wire)
            t.append(time.perf_counter())
            out = grpcclient.InferResult(resp).as_numpy(name)
            t.append(time.perf_counter())
            if i == 0 and out.tobytes() != a.tobytes():
                sys.exit("tritonclient: the output differs")
            if i >= 2:
                for k in range(5):
                    parts[k].append(t[k + 1] - t[k])
        med = [statistics.median(p) for p in parts]
        print(size, sum(med), *med, flush=True)
    client.close()


if __name__ == "__main__":
    peer, addr, model, name = sys.argv[1:5]
    plan = [tuple(int(x) for x in p.split(":")) for p in sys.argv[5:]]
    if peer == "kserve":
        asyncio.run(kserve(addr, model, name, plan))
    elif peer == "triton-parts":
        triton_parts(addr, model, name, plan)
    else:
        triton(addr, model, name, plan)
