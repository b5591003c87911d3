"""An MLServer model "echo": every input back as an output of the same
name, taken through NumPy (NumpyCodec decode, then encode), so its bytes
pass through MLServer's own decoding and encoding. The dloip Go tests
start `mlserver start` on this folder with a settings.json of their own
(ports, message limits)."""
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class Echo(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        outputs = []
        for inp in payload.inputs:
            a = NumpyCodec.decode_input(inp)
            outputs.append(NumpyCodec.encode_output(name=inp.name, payload=a))
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=outputs)
