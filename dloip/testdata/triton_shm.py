"""tritonclient's system shared memory against a dloip Go server serving
"echo" (a Dynamic model): regions made by tritonclient.utils.shared_memory,
registered through tritonclient.grpc, the input read by the server from
one region at an offset and the output written by it into another,
every datatype at several shapes, bit for bit; then the bounds (a span
outside the region) and unregistering.

usage: python triton_shm.py HOST:PORT
"""
import os
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(__file__))
from peer_clients import NP, TRITON, random_array  # noqa: E402

SHAPES = [(), (7,), (2, 3, 4), (256, 1024)]
OFFSETS = [0, 8, 64]


def main():
    addr = sys.argv[1]
    client = grpcclient.InferenceServerClient(addr, channel_args=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)])
    rng = np.random.default_rng(11)
    size = 4 << 20
    pid = os.getpid()
    hin = shm.create_shared_memory_region("in", f"/dloip_in_{pid}", size)
    hout = shm.create_shared_memory_region("out", f"/dloip_out_{pid}", size)
    try:
        client.register_system_shared_memory("in", f"/dloip_in_{pid}", size)
        client.register_system_shared_memory("out", f"/dloip_out_{pid}", size)
        status = client.get_system_shared_memory_status()
        if sorted(r.name for r in status.regions.values()) != ["in", "out"]:
            sys.exit(f"status: {status}")
        n = 0
        for off in OFFSETS:
            for shape in SHAPES:
                for dt in TRITON:
                    a = random_array(rng, dt, shape)
                    nbytes = a.nbytes
                    # its 0-d arrays cannot be set: the same bytes, flat
                    shm.set_shared_memory_region(hin, [a.reshape(-1)], offset=off)
                    inp = grpcclient.InferInput("x_" + dt, list(shape), dt)
                    inp.set_shared_memory("in", nbytes, offset=off)
                    out = grpcclient.InferRequestedOutput("x_" + dt)
                    out.set_shared_memory("out", nbytes, offset=off)
                    res = client.infer("echo", [inp], outputs=[out])
                    o = res.get_output("x_" + dt)
                    if o is None or list(o.shape) != list(shape) or o.datatype != dt:
                        sys.exit(f"{dt} {shape}: output {o}")
                    got = shm.get_contents_as_numpy(hout, NP[dt], shape, offset=off)
                    if got.tobytes() != a.tobytes():
                        sys.exit(f"{dt} {shape} at offset {off}: the output region differs from the input")
                    n += 1
        # A span outside the region is refused, and the server serves on.
        inp = grpcclient.InferInput("x_FP32", [4], "FP32")
        inp.set_shared_memory("in", 16, offset=size - 8)
        try:
            client.infer("echo", [inp])
            sys.exit("a span outside the region was taken")
        except InferenceServerException as e:
            if "outside" not in str(e):
                sys.exit(f"bounds: {e}")
            bounds = e.status()
        client.unregister_system_shared_memory()
        if len(client.get_system_shared_memory_status().regions) != 0:
            sys.exit("regions left after unregistering")
    finally:
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)
    print(f"tritonclient system shared memory -> dloip server: {n} tensors ({len(TRITON)} datatypes x {len(SHAPES)} shapes x offsets {OFFSETS}) bit for bit; a span outside its region: {bounds}")


if __name__ == "__main__":
    main()
