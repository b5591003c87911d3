"""The GPU suite: CUDA tensors of PyTorch, CuPy and JAX through Go on a real
device. gpu/run.sh runs it on a machine with an NVIDIA GPU and sets
GODLPACK_GPU_MATRIX, where the matrix (device, driver, versions, each
case's outcome, the figures) is written. Without CUDA (or without a
framework) every CUDA case skips, and no matrix is written; the checks of
the suite's own helpers (test_helpers_cpu.py) run anywhere.

The frameworks are imported by fixtures, never at collection, so the suite
collects anywhere godlpack loads."""
import gc
import os
import platform
import subprocess
import time

import pytest

import godlpack
import gocuda

# JAX would take 75% of the GPU at its first use; the three frameworks
# share the device here.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


@pytest.fixture(scope="session")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    return torch


@pytest.fixture(scope="session")
def cupy(torch):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"CuPy sees no CUDA device: {e}")
    return cupy


@pytest.fixture(scope="session")
def jax(torch):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    return jax


@pytest.fixture(autouse=True)
def nothing_left():
    """Each case ends with every Go handle closed, every export released,
    no deleter called twice and no import left to the cleanup."""
    gc.collect()
    before, live = gocuda.stats(), godlpack.live()
    yield
    gc.collect()
    s = gocuda.stats()
    # Relative to the start, so that a failed case's leftovers (kept by its
    # traceback) fail that case only.
    assert godlpack.live() <= live, "GoTensors left open"
    assert s["outstanding"] <= before["outstanding"], s
    assert s["bad_releases"] == before["bad_releases"], s
    assert s["leaked_imports"] == before["leaked_imports"], s


# ---- The matrix ---------------------------------------------------------------

# test function -> (chain, case); "refused: ..." marks a case that passes by
# asserting a clean refusal.
CASES = {
    "test_torch_go_cupy": ("PyTorch → Go → CuPy", "float32, zero copy, values by CuPy, PyTorch's memory freed once after both let go"),
    "test_cupy_go_torch": ("CuPy → Go → PyTorch", "float32, zero copy, values by PyTorch, CuPy's array released once after both let go"),
    "test_jax_go_torch": ("JAX → Go → PyTorch", "float32, zero copy, values by PyTorch, JAX's buffer freed once after both let go"),
    "test_layouts_torch_go_cupy": ("PyTorch → Go → CuPy", "layout, zero copy, strides kept, values by CuPy"),
    "test_layouts_cupy_go_torch": ("CuPy → Go → PyTorch", "layout, zero copy, strides kept, values by PyTorch"),
    "test_reduced_precision_torch": ("PyTorch → Go → PyTorch", "dtype, zero copy, bit-exact on the GPU"),
    "test_reduced_precision_jax": ("JAX → Go → PyTorch", "dtype, zero copy, bit-exact on the GPU"),
    "test_jax_read_only_stays_read_only": ("JAX → Go → PyTorch, Go", "read-only: Go's import and re-export stay READ_ONLY; legacy or copy requests refused (no device copies)"),
    "test_cpu_view_of_device_memory_refused": ("PyTorch, CuPy → Go", "refused: a CPU view of CUDA memory is ErrDevice, with AllowHostMemory too"),
    "test_allow_host_memory": ("CuPy → Go", "host-accessible CUDA memory: Go reads it on the CPU with AllowHostMemory, ErrDevice without"),
    "test_stream_forwarded": ("producer → Go → consumer", "streams: a side-stream write read at once on another stream, 1,000 rounds, values right"),
    "test_exchange_api_torch": ("PyTorch → Go", "__dlpack_c_exchange_api__: import through PyTorch's table, current_work_stream, beside __dlpack__"),
    "test_soak_torch_go_torch": ("PyTorch → Go → PyTorch", "soak: 100,000 round trips, torch.cuda.memory_allocated flat, nothing outstanding"),
    "test_info_and_cpu_read_match_numpy": ("NumPy → Go (CPU)", "the suite's helpers: what Go reports, the CPU read, ErrClosed"),
    "test_options_and_flags": ("NumPy → Go (CPU)", "the suite's helpers: read-only, legacy, AssumeWritable, AllowHostMemory"),
    "test_the_producer_object_is_kept_until_close": ("NumPy → Go (CPU)", "the suite's helpers: the producer object kept, released at close"),
    "test_exchange_table_path": ("tvm-ffi → Go (CPU)", "the suite's helpers: import through an exchange table"),
    "test_soak_cupy_go_cupy": ("CuPy → Go → CuPy", "soak: 100,000 round trips, CuPy's pool flat, nothing outstanding"),
}

_results = {}  # nodeid -> (outcome, skip reason)


@pytest.fixture
def note(request):
    """note(text): what the case observed of a framework, shown beside its
    outcome in the matrix."""
    def add(text):
        old = gocuda.NOTES.get(request.node.nodeid)
        gocuda.NOTES[request.node.nodeid] = f"{old}; {text}" if old else text
    return add


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
        elif report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = (crash.message if crash else str(report.longrepr)).splitlines()[0][:200]
        _results[report.nodeid] = (report.outcome, reason)
    elif report.when == "teardown" and report.failed and _results.get(report.nodeid, ("passed",))[0] == "passed":
        crash = getattr(report.longrepr, "reprcrash", None)
        _results[report.nodeid] = ("failed", "after the case: " + (crash.message.splitlines()[0][:200] if crash else ""))


def _versions():
    import importlib.metadata as md
    import torch

    out = {"device": torch.cuda.get_device_name(0), "compute capability": "%d.%d" % torch.cuda.get_device_capability(0)}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        out["driver (nvidia-smi)"] = smi
    except (OSError, subprocess.SubprocessError) as e:
        out["driver (nvidia-smi)"] = f"unavailable ({e})"
    out["CUDA (PyTorch built with)"] = torch.version.cuda
    for name in ("torch", "cupy-cuda13x", "cupy-cuda12x", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "numpy", "pytest"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    out["CPython"] = platform.python_version()
    out["Go (libgodlpack built with)"] = gocuda.go_version()
    commit = os.environ.get("GODLPACK_COMMIT")
    if commit:
        out["commit"] = commit
    return out


def pytest_sessionfinish(session):
    path = os.environ.get("GODLPACK_GPU_MATRIX")
    if not path:
        return
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if not cuda:
        print("\nGODLPACK_GPU_MATRIX: no CUDA device, no matrix written")
        return
    rows = []
    for nodeid, (outcome, reason) in sorted(_results.items()):
        name = nodeid.split("::")[-1]
        func, _, param = name.partition("[")
        chain, case = CASES.get(func, ("?", func))
        if param:
            case = f"{case} [{param.rstrip(']')}]"
        status = {"passed": "pass", "failed": "FAILED", "skipped": "skipped"}.get(outcome, outcome)
        if status == "pass" and case.startswith("refused: "):
            case, status = case.removeprefix("refused: "), "refused as designed"
        if status in ("skipped", "FAILED") and reason:
            status = f"{status}: {reason}"
        if nodeid in gocuda.NOTES:
            status += f" ({gocuda.NOTES[nodeid]})"
        rows.append((chain, case, status))
    ok = sum(1 for r in rows if r[2].startswith(("pass", "refused")))
    failed = sum(1 for r in rows if r[2].startswith("FAILED"))
    with open(path, "w") as f:
        f.write("# GPU interoperability matrix\n\n")
        f.write("Generated on a machine with an NVIDIA GPU by the GPU suite (`make gpu-build` here, then "
                "`bash .build/gpu/run.sh` there; see docs/gpu.md) from the outcome of each case. Each case checks "
                "the values (computed on the GPU by the consuming framework), the same device pointer where "
                "zero copy is promised, that the producer's memory is freed once after every holder let go, "
                "and that Go ends with nothing outstanding.\n\n")
        f.write(f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n")
        f.write("| | |\n|---|---|\n")
        for k, v in _versions().items():
            f.write(f"| {k} | {v} |\n")
        f.write(f"\n{ok} of {len(rows)} cases as expected, {failed} failed, "
                f"{len(rows) - ok - failed} skipped.\n\n")
        f.write("| chain | case | outcome |\n|---|---|---|\n")
        for r in rows:
            f.write("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in r) + " |\n")
        if gocuda.FIGURES:
            f.write("\n## Figures\n\n| what | figure |\n|---|---|\n")
            for k, v in gocuda.FIGURES.items():
                f.write(f"| {k} | {v} |\n")
