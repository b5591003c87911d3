import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "dlonnx", "testdata"))


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """The test models, written by the onnx package (dlonnx/testdata/models.py)."""
    import models as m
    out = tmp_path_factory.mktemp("models")
    m.main(str(out))
    return out
