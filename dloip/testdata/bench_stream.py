"""Times tritonclient's streaming inference against a server of the
"flood" model (n in; n responses of 16 bytes, the last one final): each
request asks for 1,000 responses on one stream (start_stream,
async_stream_infer), timed from the send to the final response's
callback, which checks every response. Prints the median seconds per
response over REQUESTS requests, after two untimed ones.

usage: python bench_stream.py HOST:PORT REQUESTS
"""
import statistics
import sys
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient

RESPONSES = 1000


def main():
    addr, requests = sys.argv[1], int(sys.argv[2])
    client = grpcclient.InferenceServerClient(addr)
    state = {"n": 0, "bad": None}
    done = threading.Event()
    want = bytes(range(16))

    def callback(result, error):
        if error is not None:
            state["bad"] = str(error)
            done.set()
            return
        if result.as_numpy("y").tobytes() != want:
            state["bad"] = "a response differs"
        state["n"] += 1
        if result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    client.start_stream(callback=callback)
    n = grpcclient.InferInput("n", [1], "INT32")
    n.set_data_from_numpy(np.array([RESPONSES], dtype=np.int32))
    times = []
    for i in range(requests + 2):
        state["n"] = 0
        done.clear()
        t0 = time.perf_counter()
        client.async_stream_infer("flood", [n])
        if not done.wait(120):
            sys.exit("tritonclient: no final response")
        elapsed = time.perf_counter() - t0
        if state["bad"] or state["n"] != RESPONSES:
            sys.exit("tritonclient: %s, %d responses" % (state["bad"], state["n"]))
        if i >= 2:
            times.append(elapsed / RESPONSES)
    client.stop_stream()
    client.close()
    print(statistics.median(times))


if __name__ == "__main__":
    main()
