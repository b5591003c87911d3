"""Times kserve's InferenceRESTClient against a REST server of the
protocol: each call sends one FP32 tensor as JSON values (no binary
data) to an echo model and reads it back as JSON. Prints one line per
size: "<size bytes> <median seconds>".

usage: python bench_rest.py BASE_URL MODEL INPUT SIZE:REPS...
"""
import asyncio
import statistics
import sys
import time

import numpy as np


async def main(base, model, name, plan):
    from kserve import InferenceRESTClient, RESTConfig
    from kserve.protocol.infer_type import InferInput, InferRequest

    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=600))
    for size, reps in plan:
        a = np.random.default_rng(1).random(size // 4, dtype=np.float32)
        times = []
        for i in range(reps + 2):
            t0 = time.perf_counter()
            inp = InferInput(name=name, shape=list(a.shape), datatype="FP32")
            inp.set_data_from_numpy(a, binary_data=False)
            resp = await client.infer(base, InferRequest(model_name=model, infer_inputs=[inp]), model_name=model)
            out = resp.outputs[0].as_numpy()
            times.append(time.perf_counter() - t0)
            if i == 0 and out.tobytes() != a.tobytes():
                sys.exit("kserve REST client: the output differs")
        print(size, statistics.median(times[2:]), flush=True)
    await client.close()


if __name__ == "__main__":
    base, model, name = sys.argv[1:4]
    asyncio.run(main(base, model, name, [tuple(int(x) for x in p.split(":")) for p in sys.argv[4:]]))
