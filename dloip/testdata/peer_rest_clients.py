"""The Python REST clients of the protocol against a dloip Go server's
REST binding (HTTPS, a bearer token) serving "echo" (a Dynamic model:
every input back as an output of the same name) and "listed" (an FP32
[-1, 4] input): kserve's InferenceRESTClient and tritonclient.http's
InferenceServerClient. Each sends every datatype it has, at several
shapes (rank 0, zero-size, 1 MiB), random bit patterns (NaN payloads
included), and text (BYTES), and requires the outputs to be the inputs.
Prints one line of counts per client and mode.

tritonclient.http: binary data both ways (every datatype, BF16 too, and
any bytes as BYTES), bit for bit; then JSON both ways (every datatype
but BF16, which it sends only as binary data; BYTES only as UTF-8 text),
every value the same, a NaN any NaN (JSON has no NaN payloads).

kserve's InferenceRESTClient sends binary data and takes the outputs as
JSON (the server's default) or, asked, as binary data. What it loses is
its own: it turns every output into a Python list before as_numpy
(InferResponse.from_bytes calls set_data_from_numpy(binary_data=False)),
so an FP32 signalling NaN comes back quiet (float32 to float to float32)
and BYTES must be UTF-8 text (it decodes them); it reads JSON with
orjson, which refuses NaN and Infinity, so the JSON outputs it is sent
hold no NaN or infinity. Everything else is bit for bit.

usage: python peer_rest_clients.py kserve|triton BASE_URL TOKEN CA_PEM_FILE
"""
import asyncio
import ssl
import sys

import numpy as np

from peer_clients import KSERVE, NP, SHAPES, TEXT, TEXT_SHAPES, TRITON, random_array, same_bits


def same_values(a, b):
    """JSON's equality: the same bits, every NaN equal to any NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f" and a.dtype != NP["BF16"]:
        return a.tobytes() == b.tobytes()
    with np.errstate(invalid="ignore"):
        x, y = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
    nan = np.isnan(x) & np.isnan(y)
    return bool(np.all(nan | (x.view(np.uint64) == y.view(np.uint64))))


def same_strings(a, b):
    """same_text, where a's elements may be str (JSON strings, as
    tritonclient.http gives them)."""
    enc = [x.encode() if isinstance(x, str) else bytes(x) for x in a.reshape(-1)]
    return a.shape == b.shape and all(x == bytes(y) for x, y in zip(enc, b.reshape(-1)))


def quiet(a):
    """a with its FP32 signalling NaNs made quiet, as a float32 to float
    to float32 trip makes them."""
    if a.dtype != np.float32:
        return a
    bits = a.view(np.uint32).copy()
    snan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0) & ((bits & 0x00400000) == 0)
    bits[snan] |= 0x00400000
    return bits.view(np.float32)


def finite(a):
    """a with every NaN and infinity made 0 (orjson has no words for them)."""
    if a.dtype.kind != "f":
        return a
    b = a.copy()
    b[~np.isfinite(b)] = 0
    return b


def text_cases(only_text):
    texts = [t for t in TEXT if not only_text or is_text(t)]
    for shape in TEXT_SHAPES:
        n = int(np.prod(shape, dtype=np.int64))
        yield np.array([texts[i % len(texts)] for i in range(n)], dtype=np.object_).reshape(shape)


def is_text(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def run_triton(base, token, ca):
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    url = base.split("://", 1)[1]
    client = httpclient.InferenceServerClient(url, ssl=True, ssl_options={"ca_certs": ca}, network_timeout=120.0)
    headers = {"Authorization": "Bearer " + token}
    if not client.is_server_live(headers=headers) or not client.is_server_ready(headers=headers) or not client.is_model_ready("echo", headers=headers):
        sys.exit("tritonclient.http: the server is not live, not ready, or echo not ready")
    if client.is_model_ready("nope", headers=headers):
        sys.exit("tritonclient.http: an unknown model is ready")
    meta = client.get_model_metadata("listed", headers=headers)
    if meta["name"] != "listed" or meta["inputs"][0]["datatype"] != "FP32" or meta["inputs"][0]["shape"] != [-1, 4]:
        sys.exit(f"tritonclient.http: metadata {meta}")
    if "binary_tensor_data" not in client.get_server_metadata(headers=headers)["extensions"]:
        sys.exit("tritonclient.http: no binary_tensor_data extension")
    if client.is_server_live():
        sys.exit("tritonclient.http: live without a token")
    try:
        client.infer("echo", [httpclient.InferInput("x", [0], "FP32")])
        sys.exit("tritonclient.http: an inference without a token")
    except InferenceServerException as e:
        if e.status() != "401":
            sys.exit(f"tritonclient.http: without a token: {e.status()} {e}")
    try:
        client.infer("nope", [httpclient.InferInput("x", [1], "FP32")], headers=dict(headers))
        sys.exit("tritonclient.http: an unknown model answered")
    except InferenceServerException as e:
        if e.status() != "404" or "nope" not in str(e):
            sys.exit(f"tritonclient.http: an unknown model: {e.status()} {e}")
    rng = np.random.default_rng(7)
    counts = {}
    for mode in ("binary", "JSON"):
        binary = mode == "binary"
        n = 0
        cases = [(dt, shape, random_array(rng, dt, shape)) for shape in SHAPES for dt in TRITON if binary or dt != "BF16"]
        cases += [("BYTES", a.shape, a) for a in text_cases(not binary)]
        for i, (dt, shape, a) in enumerate(cases):
            inp = httpclient.InferInput("x_" + dt, list(shape), dt)
            inp.set_data_from_numpy(a, binary_data=binary)
            # every other request names its output; the others ask for
            # every output in binary (binary_data_output)
            outputs = [httpclient.InferRequestedOutput("x_" + dt, binary_data=binary)] if i % 2 == 0 or not binary else None
            # a fresh dict each time, as for kserve's client below
            res = client.infer("echo", [inp], outputs=outputs, request_id=f"{dt}{shape}", headers=dict(headers))
            out = res.as_numpy("x_" + dt)
            same = same_strings if dt == "BYTES" else (same_bits if binary else same_values)
            if out is None or not same(out.reshape(shape), a) or res.get_response()["id"] != f"{dt}{shape}" or res.get_output("x_" + dt)["datatype"] != dt:
                sys.exit(f"tritonclient.http {mode}: {dt} {shape}: the output differs from the input")
            n += 1
        counts[mode] = n
    client.close()
    print(f"tritonclient.http -> dloip REST server (HTTPS, token): binary data both ways: {counts['binary']} tensors "
          f"({len(TRITON)} datatypes x {len(SHAPES)} shapes, and BYTES at {len(TEXT_SHAPES)} shapes, any bytes) bit for bit; "
          f"JSON both ways: {counts['JSON']} tensors ({len(TRITON) - 1} datatypes, no BF16; BYTES text) the same values")


async def run_kserve(base, token, ca):
    from kserve import InferenceRESTClient, RESTConfig
    from kserve.protocol.infer_type import InferInput, InferRequest, RequestedOutput

    ctx = ssl.create_default_context(cafile=ca)
    client = InferenceRESTClient(RESTConfig(protocol="v2", verify=ctx, timeout=120))
    headers = {"Authorization": "Bearer " + token}
    if not await client.is_server_live(base, headers=headers) or not await client.is_server_ready(base, headers=headers):
        sys.exit("kserve client: the server is not live or not ready")
    if not await client.is_model_ready(base, "echo", headers=headers) or await client.is_model_ready(base, "nope", headers=headers):
        sys.exit("kserve client: model readiness")
    rng = np.random.default_rng(9)
    counts = {}
    for mode in ("JSON", "binary"):
        n = 0
        cases = [(dt, shape, random_array(rng, dt, shape)) for shape in SHAPES for dt in KSERVE]
        cases += [("BYTES", a.shape, a) for a in text_cases(True)]
        for dt, shape, a in cases:
            if mode == "JSON":
                a = finite(a)
            inp = InferInput(name="x_" + dt, shape=list(shape), datatype=dt)
            inp.set_data_from_numpy(a, binary_data=True)
            outs = [RequestedOutput("x_" + dt, parameters={"binary_data": True})] if mode == "binary" else None
            # a fresh dict each time: infer adds the binary-data header to
            # the one it is given, and would send it with the next request
            resp = await client.infer(base, InferRequest(model_name="echo", infer_inputs=[inp], request_id=f"{dt}{shape}", request_outputs=outs),
                                      model_name="echo", headers=dict(headers))
            out = resp.outputs[0].as_numpy()
            if dt == "BYTES":
                ok = out.shape == a.shape and all(str(x) == y.decode() for x, y in zip(out.reshape(-1), a.reshape(-1)))
            else:
                ok = same_bits(out.reshape(shape), quiet(a))
            if not ok or resp.id != f"{dt}{shape}" or resp.outputs[0].datatype != dt:
                sys.exit(f"kserve client {mode} outputs: {dt} {shape}: the output differs from the input")
            n += 1
        counts[mode] = n
    await client.close()
    print(f"kserve InferenceRESTClient -> dloip REST server (HTTPS, token): binary inputs, outputs as JSON: {counts['JSON']} tensors "
          f"({len(KSERVE)} datatypes x {len(SHAPES)} shapes, floats finite; BYTES text) bit for bit; outputs as binary data: {counts['binary']} "
          f"tensors bit for bit but for FP32 signalling NaNs, which kserve's client makes quiet")


if __name__ == "__main__":
    peer, base, token, ca = sys.argv[1:5]
    if peer == "kserve":
        asyncio.run(run_kserve(base, token, ca))
    else:
        run_triton(base, token, ca)
