"""tritonclient.grpc's streaming inference (start_stream, async_stream_infer)
against a dloip Go server serving the decoupled models "tokens" (the final
flag sent alone), "last" (the last token final) and "fails" (two tokens,
then an error), and "echo", a plain model (one response per request):

  tokens/last  prompt (BYTES [1]) and n (INT32 [1]) in; n responses, token
               i the text "<prompt> i" (BYTES [1]) and i (INT32 [1])
  echo         x (INT32 [-1]) back

It checks every response's text, number and triton_final_response as
Triton sends them: the empty final response only when the request asks
for it (enable_empty_final_response), requests in flight together on one
stream each answered whole and in order, error answers (a failing model,
an unknown model) as the callback's error, with the stream going on after
them. Prints one line of counts.

usage: python triton_stream.py HOST:PORT TOKEN
"""
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient


def fail(msg):
    sys.exit("tritonclient stream: " + msg)


def final(result):
    return result.get_response().parameters["triton_final_response"].bool_param


def main():
    addr, token = sys.argv[1], sys.argv[2]
    client = grpcclient.InferenceServerClient(addr)
    results = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)),
                        headers={"authorization": "Bearer " + token})

    def send(model, rid, prompt, n, empty_final=False):
        p = grpcclient.InferInput("prompt", [1], "BYTES")
        p.set_data_from_numpy(np.array([prompt], dtype=np.object_))
        k = grpcclient.InferInput("n", [1], "INT32")
        k.set_data_from_numpy(np.array([n], dtype=np.int32))
        client.async_stream_infer(model, [p, k], request_id=rid, enable_empty_final_response=empty_final)

    def take(count):
        out = []
        for _ in range(count):
            try:
                out.append(results.get(timeout=60))
            except queue.Empty:
                fail("%d of %d responses came" % (len(out), count))
        return out

    def check_token(result, error, rid, prompt, i, want_final):
        if error is not None:
            fail("%s: token %d: %s" % (rid, i, error))
        if result.get_response().id != rid:
            fail("%s: token %d answers %r" % (rid, i, result.get_response().id))
        text, index = result.as_numpy("text"), result.as_numpy("index")
        if text is None or index is None or text.shape != (1,) or index.dtype != np.int32:
            fail("%s: token %d: outputs %r %r" % (rid, i, text, index))
        if bytes(text[0]) != prompt + b" %d" % i or int(index[0]) != i:
            fail("%s: token %d is %r %r" % (rid, i, text[0], index[0]))
        if final(result) != want_final:
            fail("%s: token %d: final %s" % (rid, i, final(result)))

    responses = requests = 0
    prompts = [b"hello", "h\u00e9llo, \u4e16\u754c".encode(), b"\x00\x01\xff binary"]

    # The final flag sent alone: an empty final response when asked.
    for prompt in prompts:
        for empty_final in (True, False):
            rid = "tokens-%s-%s" % (prompt.hex(), empty_final)
            send("tokens", rid, prompt, 5, empty_final)
            got = take(6 if empty_final else 5)
            for i in range(5):
                check_token(*got[i], rid, prompt, i, False)
            if empty_final:
                result, error = got[5]
                if error is not None or result.get_response().outputs or not final(result) or result.get_response().id != rid:
                    fail("%s: the empty final response: %s %s" % (rid, result and result.get_response(), error))
            responses += len(got)
            requests += 1

    # The last token final, and no empty response after it even when asked.
    for empty_final in (False, True):
        rid = "last-%s" % empty_final
        send("last", rid, b"last", 4, empty_final)
        got = take(4)
        for i in range(4):
            check_token(*got[i], rid, b"last", i, i == 3)
        responses += 4
        requests += 1

    # Four requests in flight on the stream at once: each whole, in order.
    n = 50
    rids = ["many-%d" % j for j in range(4)]
    for j, rid in enumerate(rids):
        send("last", rid, b"p%d" % j, n)
    got = take(4 * n)
    seen = {rid: 0 for rid in rids}
    switches, previous = 0, None
    for result, error in got:
        if error is not None:
            fail("many: %s" % error)
        rid = result.get_response().id
        j = rids.index(rid)
        check_token(result, error, rid, b"p%d" % j, seen[rid], seen[rid] == n - 1)
        seen[rid] += 1
        switches += previous is not None and previous != rid
        previous = rid
    responses += len(got)
    requests += 4

    # Errors: the callback's error, naming the request; the stream goes on.
    send("fails", "fails", b"f", 2)
    got = take(3)
    for i in range(2):
        check_token(*got[i], "fails", b"f", i, False)
    result, error = got[2]
    if result is not None or error is None or "the model fails after two tokens" not in str(error):
        fail("fails: %s %s" % (result, error))
    send("nothing", "unknown", b"x", 1)
    result, error = take(1)[0]
    if result is not None or error is None or "no such model" not in str(error):
        fail("unknown: %s %s" % (result, error))
    errors = 2
    send("last", "after", b"after", 2)
    got = take(2)
    for i in range(2):
        check_token(*got[i], "after", b"after", i, i == 1)
    responses += 5
    requests += 3

    # A plain model on the stream: one response, final.
    x = grpcclient.InferInput("x", [3], "INT32")
    x.set_data_from_numpy(np.array([7, -1, 2**31 - 1], dtype=np.int32))
    client.async_stream_infer("echo", [x], request_id="echo")
    result, error = take(1)[0]
    if error is not None or not final(result) or list(result.as_numpy("x")) != [7, -1, 2**31 - 1]:
        fail("echo: %s %s" % (result, error))
    responses += 1
    requests += 1

    client.stop_stream()
    client.close()
    if not results.empty():
        fail("responses after the last one expected")
    print("tritonclient start_stream/async_stream_infer -> Go server: %d responses to %d requests (text, numbers, "
          "final flags as Triton's, the empty final response only when asked), 4 requests at once answered whole "
          "(%d switches between them), %d error answers and the stream on after them" % (responses, requests, switches, errors))


if __name__ == "__main__":
    main()
