"""A Python gRPC server of Triton's streaming inference (ModelStreamInfer),
written on the protocol's own definitions as tritonclient ships them
(tritonclient.grpc.service_pb2 and service_pb2_grpc's servicer), for the
dloip client to stream from. It serves the models the Go tests serve:

  tokens  prompt (BYTES [1]) and n (INT32 [1]) in; n responses, token i
          the text "<prompt> i" (BYTES [1]) and i (INT32 [1]); the final
          flag sent alone, as an empty response only when the request
          sets triton_enable_empty_final_response, as Triton does
  last    the same, the n-th token the final response
  fails   two tokens, then the error "the model fails after two tokens"
  flood   n (INT32 [1]) in; n responses of 16 bytes (UINT8 [16]), the
          last one final: the streaming benchmark

Each response carries triton_final_response as Triton's do; an unknown
model or a bad request is answered with error_message and the request's
id, and the stream goes on. Requests on one stream run one after another.
It prints "port N" once it serves, and serves until stdin closes.

usage: python stream_server.py
"""
import struct
import sys
from concurrent import futures

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc


def bytes_raw(elements):
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def final_param(response, final):
    response.parameters["triton_final_response"].bool_param = final


class Failed(Exception):
    pass


def inputs(request):
    """The request's inputs by name, as raw bytes."""
    if len(request.raw_input_contents) != len(request.inputs):
        raise Failed("raw_input_contents: %d entries for %d inputs" % (len(request.raw_input_contents), len(request.inputs)))
    return {t.name: (t, raw) for t, raw in zip(request.inputs, request.raw_input_contents)}


def int32_input(ins, name):
    if name not in ins:
        raise Failed('input "%s": missing' % name)
    t, raw = ins[name]
    if t.datatype != "INT32" or list(t.shape) != [1] or len(raw) != 4:
        raise Failed('input "%s": INT32 [1] expected' % name)
    return struct.unpack("<i", raw)[0]


def text_input(ins, name):
    if name not in ins:
        raise Failed('input "%s": missing' % name)
    t, raw = ins[name]
    if t.datatype != "BYTES" or list(t.shape) != [1] or len(raw) < 4:
        raise Failed('input "%s": BYTES [1] expected' % name)
    (n,) = struct.unpack("<I", raw[:4])
    if n != len(raw) - 4:
        raise Failed('input "%s": element length %d of %d bytes' % (name, n, len(raw) - 4))
    return raw[4:]


def response(request, outputs, final):
    """A ModelStreamInferResponse of outputs: (name, datatype, shape, raw)."""
    r = service_pb2.ModelStreamInferResponse()
    ir = r.infer_response
    ir.model_name, ir.model_version, ir.id = request.model_name, request.model_version, request.id
    for name, datatype, shape, raw in outputs:
        o = ir.outputs.add()
        o.name, o.datatype = name, datatype
        o.shape.extend(shape)
        ir.raw_output_contents.append(raw)
    final_param(ir, final)
    return r


def error(request, message):
    r = service_pb2.ModelStreamInferResponse(error_message=message)
    ir = r.infer_response
    ir.model_name, ir.model_version, ir.id = request.model_name, request.model_version, request.id
    final_param(ir, True)
    return r


def token(request, prompt, i, final):
    return response(request, [("text", "BYTES", [1], bytes_raw([b"%s %d" % (prompt, i)])),
                              ("index", "INT32", [1], struct.pack("<i", i))], final)


def run(request):
    """The responses to one request."""
    model = request.model_name
    try:
        ins = inputs(request)
        if model in ("tokens", "last", "fails"):
            prompt, n = text_input(ins, "prompt"), int32_input(ins, "n")
            if model == "fails":
                for i in range(2):
                    yield token(request, prompt, i, False)
                yield error(request, "the model fails after two tokens")
                return
            for i in range(n):
                yield token(request, prompt, i, model == "last" and i == n - 1)
            if model == "tokens":
                p = request.parameters.get("triton_enable_empty_final_response")
                if p is not None and p.bool_param:
                    yield response(request, [], True)
        elif model == "flood":
            n = int32_input(ins, "n")
            payload = bytes(range(16))
            for i in range(n):
                yield response(request, [("y", "UINT8", [16], payload)], i == n - 1)
        else:
            yield error(request, 'Request for unknown model: \'%s\' is not found' % model)
    except Failed as e:
        yield error(request, "model '%s': %s" % (model, e))


class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    def ServerLive(self, request, context):
        return service_pb2.ServerLiveResponse(live=True)

    def ModelStreamInfer(self, request_iterator, context):
        for request in request_iterator:
            yield from run(request)


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("port", port, flush=True)
    sys.stdin.read()
    server.stop(None)


if __name__ == "__main__":
    main()
