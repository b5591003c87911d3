"""A kserve ModelServer serving a NumPy model "echo": every input comes
back as an output of the same name, taken through NumPy (as_numpy, then
set_data_from_numpy), so its bytes pass through kserve's own decoding and
encoding; it answers in binary data. "echo_json" is the same model
answering with JSON values, as a kserve model does by default. The dloip
Go tests dial it over gRPC and REST.

usage: python kserve_server.py --grpc_port N --http_port M [--grpc_max_send_message_length B --grpc_max_receive_message_length B]
"""
from kserve import Model, ModelServer
from kserve.protocol.infer_type import InferOutput, InferResponse


class Echo(Model):
    def __init__(self, name="echo", binary=True):
        super().__init__(name)
        self.binary = binary
        self.ready = True

    def predict(self, payload, headers=None, response_headers=None):
        outs = []
        for inp in payload.inputs:
            a = inp.as_numpy()
            o = InferOutput(name=inp.name, shape=list(a.shape), datatype=inp.datatype)
            o.set_data_from_numpy(a, binary_data=self.binary)
            outs.append(o)
        return InferResponse(response_id=payload.id, model_name=self.name, infer_outputs=outs, use_binary_outputs=self.binary)


if __name__ == "__main__":
    ModelServer().start([Echo(), Echo("echo_json", binary=False)])
