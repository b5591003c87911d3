"""The arguments of __dlpack__, side by side: Go's (pycapsule.DLPack,
through GoTensor) and NumPy's own ndarray.__dlpack__ on the same keyword
arguments. Each case says what the array API accepts; both must accept it
or refuse it with the same exception type. Where NumPy accepts more than
the array API names, STRICTER says what NumPy does and why Go does not."""
import gc

import numpy as np
import pytest

import godlpack


@pytest.fixture(autouse=True)
def nothing_outstanding():
    yield
    gc.collect()
    assert godlpack.outstanding() == 0


class Index:
    """An int by __index__, as numpy.int64 is."""

    def __index__(self):
        return 1


class NoTruth:
    def __bool__(self):
        raise RuntimeError("no truth value")


OK = None  # accepted: a capsule

# (id, keyword arguments, outcome: OK or the exception type)
CASES = [
    ("no arguments", {}, OK),
    # copy: True, False or None (the array API's bool | None)
    ("copy=None", {"copy": None}, OK),
    ("copy=True", {"copy": True}, OK),
    ("copy=False", {"copy": False}, OK),
    ("copy='yes'", {"copy": "yes"}, ValueError),
    ("copy=''", {"copy": ""}, ValueError),
    ("copy=1", {"copy": 1}, ValueError),
    ("copy=0", {"copy": 0}, ValueError),
    ("copy=1.0", {"copy": 1.0}, ValueError),
    ("copy=[] (a list)", {"copy": []}, ValueError),
    ("copy=np.True_", {"copy": np.True_}, ValueError),
    ("copy=NoTruth()", {"copy": NoTruth()}, ValueError),
    # max_version: None or a tuple of two ints
    ("max_version=None", {"max_version": None}, OK),
    ("max_version=(1,0)", {"max_version": (1, 0)}, OK),
    ("max_version=(1,3)", {"max_version": (1, 3)}, OK),
    ("max_version=(0,8)", {"max_version": (0, 8)}, OK),
    ("max_version=(2,0)", {"max_version": (2, 0)}, OK),
    ("max_version=(-1,0)", {"max_version": (-1, 0)}, OK),
    ("max_version=(1,-1)", {"max_version": (1, -1)}, OK),
    ("max_version=(2**40,0)", {"max_version": (2**40, 0)}, OK),
    ("max_version=(True,0)", {"max_version": (True, 0)}, OK),
    ("max_version=(np.int64(1),0)", {"max_version": (np.int64(1), 0)}, OK),
    ("max_version=(Index(),0)", {"max_version": (Index(), 0)}, OK),
    ("max_version=1", {"max_version": 1}, TypeError),
    ("max_version='1.0'", {"max_version": "1.0"}, TypeError),
    ("max_version=[1,0] (a list)", {"max_version": [1, 0]}, TypeError),
    ("max_version=(1,)", {"max_version": (1,)}, TypeError),
    ("max_version=(1,2,3)", {"max_version": (1, 2, 3)}, TypeError),
    ("max_version=(1.0,0)", {"max_version": (1.0, 0)}, TypeError),
    ("max_version=('1','3')", {"max_version": ("1", "3")}, TypeError),
    ("max_version=(2**63,0)", {"max_version": (2**63, 0)}, OverflowError),
    ("max_version=(1,2**70)", {"max_version": (1, 2**70)}, OverflowError),
    ("max_version=(1,'3')", {"max_version": (1, "3")}, TypeError),
    ("max_version=(1,None)", {"max_version": (1, None)}, TypeError),
    # dl_device: None or a tuple (device_type, device_id) of ints; a device
    # the producer cannot export to is a BufferError
    ("dl_device=None", {"dl_device": None}, OK),
    ("dl_device=(1,0)", {"dl_device": (1, 0)}, OK),
    ("dl_device=(True,0)", {"dl_device": (True, 0)}, OK),
    ("dl_device=(np.int64(1),np.int64(0))", {"dl_device": (np.int64(1), np.int64(0))}, OK),
    ("dl_device=(Index(),0)", {"dl_device": (Index(), 0)}, OK),
    ("dl_device=[1,0] (a list)", {"dl_device": [1, 0]}, TypeError),
    ("dl_device=1", {"dl_device": 1}, TypeError),
    ("dl_device='cpu'", {"dl_device": "cpu"}, TypeError),
    ("dl_device=(1,)", {"dl_device": (1,)}, TypeError),
    ("dl_device=(1,0,0)", {"dl_device": (1, 0, 0)}, TypeError),
    ("dl_device=(1.0,0)", {"dl_device": (1.0, 0)}, TypeError),
    ("dl_device=(2,0)", {"dl_device": (2, 0)}, BufferError),
    ("dl_device=(1,1)", {"dl_device": (1, 1)}, BufferError),
    ("dl_device=(0,0)", {"dl_device": (0, 0)}, BufferError),
    ("dl_device=(-1,0)", {"dl_device": (-1, 0)}, BufferError),
    ("dl_device=(1,-1)", {"dl_device": (1, -1)}, BufferError),
    ("dl_device=(2**31,0)", {"dl_device": (2**31, 0)}, OverflowError),
    ("dl_device=(1,2**31)", {"dl_device": (1, 2**31)}, OverflowError),
    ("dl_device=(1,-2**31-1)", {"dl_device": (1, -2**31 - 1)}, OverflowError),
    ("dl_device=(1,2**70)", {"dl_device": (1, 2**70)}, OverflowError),
    # stream: on the CPU only None (RuntimeError, NumPy's "only supports
    # stream=None"; pyarrow and JAX raise RuntimeError subclasses)
    ("stream=None", {"stream": None}, OK),
    ("stream=-1", {"stream": -1}, RuntimeError),
    ("stream=0", {"stream": 0}, RuntimeError),
    ("stream=1", {"stream": 1}, RuntimeError),
    ("stream=2", {"stream": 2}, RuntimeError),
    ("stream=5", {"stream": 5}, RuntimeError),
    ("stream=-2", {"stream": -2}, RuntimeError),
    ("stream=True", {"stream": True}, RuntimeError),
    ("stream=1.0", {"stream": 1.0}, RuntimeError),
    ("stream='s'", {"stream": "s"}, RuntimeError),
    # together, and keywords the protocol does not have
    ("legacy, copy=True", {"max_version": None, "copy": True}, OK),
    ("legacy, copy=False", {"max_version": None, "copy": False}, OK),
    ("versioned, own device, copy=False", {"max_version": (1, 3), "dl_device": (1, 0), "copy": False}, OK),
    ("versioned, own device, copy=True", {"max_version": (1, 3), "dl_device": (1, 0), "copy": True}, OK),
    ("bogus=1", {"bogus": 1}, TypeError),
]

# Cases where NumPy 2.x accepts what the array API does not name: id ->
# (NumPy's outcome, why Go refuses). Every other case must match.
STRICTER = {
    "copy=1": (OK, "NumPy reads any non-string by its truth value; the array API's copy is bool | None"),
    "copy=0": (OK, "as copy=1"),
    "copy=1.0": (OK, "as copy=1"),
    "copy=[] (a list)": (OK, "as copy=1"),
    "copy=np.True_": (OK, "NumPy takes its own bool scalar; the array API's copy is a Python bool"),
    "copy=NoTruth()": (RuntimeError, "NumPy asks the object's truth value, which raises; Go never calls into it"),
    "max_version=(1,2**70)": (OK, "NumPy reads only the major version; the array API's max_version is a tuple of two ints"),
    "max_version=(1,'3')": (OK, "as max_version=(1,2**70)"),
    "max_version=(1,None)": (OK, "as max_version=(1,2**70)"),
}

# The name a refusal's message gives the argument: pycapsule names the
# argument; the producer behind it names the request's field.
NAMED = {"stream": ("stream = ",), "max_version": ("max_version = ",), "copy": ("copy = ", "request.copy"),
         "dl_device": ("dl_device = ", "request.device")}


def outcome(obj, kwargs):
    """OK and the capsule's name, or the exception type and message."""
    try:
        cap = obj.__dlpack__(**kwargs)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e), str(e)
    name = "dltensor_versioned" if '"dltensor_versioned"' in repr(cap) else "dltensor"
    del cap  # unconsumed: its destructor releases the tensor
    return OK, name


@pytest.mark.parametrize("kwargs, want", [pytest.param(k, w, id=i) for i, k, w in CASES])
def test_dlpack_arguments_side_by_side_with_numpy(request, kwargs, want):
    case = request.node.callspec.id
    go, go_detail = outcome(godlpack.GoTensor(1, 4), kwargs)
    np_, np_detail = outcome(np.arange(4.0), kwargs)
    assert go is want, f"Go: {go} ({go_detail}), want {want}"
    np_want = STRICTER[case][0] if case in STRICTER else want
    assert np_ is np_want, f"NumPy: {np_} ({np_detail}), want {np_want}"
    if go is OK and np_ is OK:
        assert go_detail == np_detail, f"capsule names: Go {go_detail}, NumPy {np_detail}"
    if go is not OK and kwargs and "bogus" not in kwargs:
        names = NAMED[next(iter(kwargs))]
        assert any(n in go_detail for n in names), f"Go's message names the argument: {go_detail}"


def test_stricter_cases_exist():
    assert set(STRICTER) <= {i for i, _, _ in CASES}
