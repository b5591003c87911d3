"""A kserve ModelServer serving a NumPy model "echo": every input comes
back as an output of the same name, taken through NumPy (as_numpy, then
set_data_from_numpy), so its bytes pass through kserve's own decoding and
encoding. The dloip Go tests dial it over gRPC.

usage: python kserve_server.py --grpc_port N --http_port M [--grpc_max_send_message_length B --grpc_max_receive_message_length B]
"""
from kserve import Model, ModelServer
from kserve.protocol.infer_type import InferOutput, InferResponse


class Echo(Model):
    def __init__(self):
        super().__init__("echo")
        self.ready = True

    def predict(self, payload, headers=None, response_headers=None):
        outs = []
        for inp in payload.inputs:
            a = inp.as_numpy()
            o = InferOutput(name=inp.name, shape=list(a.shape), datatype=inp.datatype)
            o.set_data_from_numpy(a, binary_data=True)
            outs.append(o)
        return InferResponse(response_id=payload.id, model_name=self.name, infer_outputs=outs, use_binary_outputs=True)


if __name__ == "__main__":
    ModelServer().start([Echo()])
