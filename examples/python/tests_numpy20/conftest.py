"""The matrix of the NumPy 2.0 suite (see matrix.py); make test sets
GODLPACK_MATRIX to docs/interop-matrix-numpy20.md."""
import matrix

CASES = {
    "test_go_to_numpy20_legacy": ("NumPy 2.0", "Go → NumPy", "bare __dlpack__() → legacy capsule; zero copy; read-only array"),
    "test_read_only_go_memory_copied": ("NumPy 2.0", "Go → NumPy", "read-only Go memory: a legacy request is answered with a copy; copy=False refused (BufferError)"),
    "test_numpy20_reexported": ("NumPy 2.0", "NumPy → Go → NumPy", "re-export of a legacy import: read-only copied, AssumeWritable shared; deleters ran"),
    "test_numpy20_to_go_falls_back": ("NumPy 2.0", "NumPy → Go", "max_version → TypeError, bare retry → legacy, read-only in Go"),
    "test_numpy20_layouts_to_go": ("NumPy 2.0", "NumPy → Go", "layouts through legacy capsules"),
    "test_unconsumed_and_twice": ("NumPy 2.0", "both", "unconsumed capsules released; a capsule consumed twice: ValueError"),
}


def pytest_runtest_logreport(report):
    matrix.record(report)


def pytest_sessionfinish(session):
    import numpy

    matrix.write("Interoperability matrix: NumPy 2.0", f"NumPy {numpy.__version__}", CASES, [])
