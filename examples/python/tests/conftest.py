"""The compatibility matrix of this suite (see matrix.py); make test sets
GODLPACK_MATRIX to docs/interop-matrix.md."""
import matrix

# test function -> (peer, direction, case); "refused: ..." outcomes are
# tests that pass by asserting a clean refusal.
CASES = {
    "test_numpy_imports_go_memory_zero_copy": ("NumPy", "Go → NumPy", "float64 matrix, zero copy, writes reach Go"),
    "test_go_owner_dropped_before_the_array": ("NumPy", "Go → NumPy", "Go owner dropped before the array"),
    "test_version_negotiation": ("NumPy", "Go → Python", "max_version None/(0,8) → legacy; (1,0)/(1,3)/(2,0) → versioned 1.3"),
    "test_unconsumed_capsules_are_released": ("any", "Go → Python", "unconsumed capsules (legacy and versioned) released"),
    "test_capsule_dropped_while_an_exception_propagates": ("any", "Go → Python", "capsule dropped with an exception pending"),
    "test_read_only_go_memory": ("NumPy", "Go → NumPy", "read-only Go memory: READ_ONLY array, shared; legacy request: a copy; legacy with copy=False refused (BufferError)"),
    "test_copy_true_makes_a_copy": ("NumPy", "Go → NumPy", "copy=True: a real copy with IS_COPIED"),
    "test_stream_and_device_arguments": ("any", "Go → Python", "stream None and the own device accepted; any other stream RuntimeError, another device BufferError"),
    "test_dlpack_arguments_side_by_side_with_numpy": ("NumPy", "Go → Python", "__dlpack__(**kwargs) side by side with NumPy's own: both accept, or both refuse with the same exception type (where NumPy accepts more than the array API, the table says why Go does not)"),
    "test_stricter_cases_exist": ("NumPy", "Go → Python", "every case where Go is stricter than NumPy is in the side-by-side table"),
    "test_go_consumes_numpy": ("NumPy", "NumPy → Go", "C/F order, transpose, step, negative, broadcast, 0-d, zero-size, offset"),
    "test_go_sees_numpy_read_only": ("NumPy", "NumPy → Go", "read-only array arrives READ_ONLY"),
    "test_a_capsule_is_consumed_once": ("NumPy", "NumPy → Go", "second consumption of a capsule: ValueError"),
    "test_go_rejects_and_releases": ("NumPy", "NumPy → Go", "tensor the Go consumer rejects: BufferError, NumPy's deleter ran; no __dlpack__: TypeError"),
    "test_numpy_go_jax_and_numpy_zero_copy": ("NumPy → Go → JAX, NumPy", "re-export", "zero copy to both, values and flags, NumPy's deleter once after all let go (Go/consumer order)"),
    "test_writes_through_the_chain_reach_numpy": ("NumPy → Go → NumPy", "re-export", "writes reach the original array"),
    "test_read_only_numpy_stays_read_only": ("NumPy → Go → JAX, NumPy", "re-export", "read-only: NumPy READ_ONLY shared; JAX (legacy) a copy; copy=False refused; copy=True"),
    "test_legacy_source_is_read_only_unless_assumed_writable": ("NumPy → Go → NumPy", "re-export", "legacy source: read-only unless AssumeWritable"),
    "test_every_dtype_reexported": ("NumPy → Go → JAX, NumPy", "re-export", "dtype, zero copy both, bit-exact"),
    "test_bfloat16_from_jax_reexported_to_jax": ("JAX → Go → JAX", "re-export", "bfloat16, read-only legacy source: a copy, bit-exact"),
    "test_strided_view_reexported": ("NumPy → Go → NumPy", "re-export", "strided, negative-stride view, zero copy"),
    "test_closed_tensor_refuses": ("any", "re-export", "closed Go owner: BufferError"),
    "test_wrapped_producer_gets_every_request": ("Python producer → Go → NumPy, JAX", "pass-through", "each request (max_version, copy) reaches the producer; a stream on the CPU refused by Go (RuntimeError), not passed on; Go holds it until close"),
    "test_jax_producer_wrapped_and_reexported_to_numpy": ("JAX → Go → NumPy", "pass-through, re-export", "legacy answers: wrapped and imported, shared, read-only"),
    "test_wrap_refuses_what_is_not_a_producer": ("any", "pass-through", "a capsule or bad __dlpack_device__: TypeError"),
    "test_producer_exceptions_arrive_unchanged": ("any", "Python → Go", "producer's exception passes unchanged; non-capsule result: ValueError"),
    "test_versioned_fallback_for_old_producers": ("any", "Python → Go", "max_version TypeError: bare retry, legacy, read-only"),
    "test_from_bytes_refuses_partial_elements": ("Go", "Python → Go", "from_bytes: partial element, short data, wrong shape, negative dim: ValueError"),
    "test_jax_shares_go_memory_of_every_size": ("JAX (CPU, x64)", "Go → JAX", "aligned Go memory shared (copy=False) at every size"),
    "test_jax_takes_read_only_go_memory_as_a_copy": ("JAX (CPU, x64)", "Go → JAX", "read-only Go memory: legacy request answered with a copy; copy=False refused"),
    "test_many_round_trips_do_not_leak": ("NumPy", "both", "2,000 round trips"),
    "test_numpy_both_ways_every_dtype": ("NumPy", "both", "dtype, bit-exact, zero copy; transposed/strided/broadcast views"),
    "test_shapes_both_ways": ("NumPy", "both", "shape"),
    "test_numpy_byte_offset_and_views": ("NumPy", "NumPy → Go", "offset views and slices"),
    "test_numpy_refuses_bfloat16_and_releases_it": ("NumPy", "Go → NumPy", "bfloat16: refused: NumPy has no bfloat16 (RuntimeError); capsule released"),
    "test_jax_both_ways": ("JAX (CPU, x64)", "both", "dtype, bit-exact"),
    "test_jax_bfloat16_both_ways": ("JAX (CPU, x64)", "both", "bfloat16, bit-exact"),
    "test_go_owner_dropped_before_jax_array": ("JAX (CPU, x64)", "Go → JAX", "Go owner dropped before the JAX array"),
    "test_go_reads_pyarrow": ("pyarrow", "pyarrow → Go", "sliced array (offset folded into data)"),
    "test_pyarrow_refusals_are_clean": ("pyarrow", "pyarrow → Go", "nulls refused by pyarrow (TypeError); empty array"),
    "test_pydlpack_both_ways": ("pydlpack (legacy)", "both", "int32 matrix, re-wrapping a Go tensor"),
    "test_soak_go_to_numpy": ("NumPy", "Go → NumPy", "soak: 100,000 round trips, memory flat"),
    "test_soak_numpy_to_go": ("NumPy", "NumPy → Go", "soak: 100,000 round trips, memory flat"),
    "test_soak_go_to_jax": ("JAX (CPU, x64)", "Go → JAX", "soak: 100,000 round trips, memory flat"),
    "test_soak_jax_to_go": ("JAX (CPU, x64)", "JAX → Go", "soak: 100,000 round trips, memory flat"),
    "test_soak_pyarrow_to_go": ("pyarrow", "pyarrow → Go", "soak: 100,000 round trips, memory flat"),
    "test_soak_pydlpack_to_go": ("pydlpack (legacy)", "pydlpack → Go", "soak: 100,000 round trips, memory flat"),
    "test_soak_go_to_pydlpack": ("pydlpack (legacy)", "Go → pydlpack", "soak: 100,000 round trips (re-wrapped, read by NumPy), memory flat"),
    "test_soak_numpy_go_jax_reexport": ("NumPy → Go → JAX", "re-export", "soak: 100,000 rounds, zero copy, NumPy's deleter once per round, memory flat"),
    "test_soak_unconsumed_capsules": ("any", "Go → Python", "soak: 100,000 unconsumed capsules, memory flat"),
    "test_deleters_on_python_threads": ("NumPy", "Go → NumPy", "deleters on threads Python created"),
}

# The DLPack 1.3 C exchange API (test_exchange.py): tvm-ffi reads
# __dlpack_c_exchange_api__; "C (ctypes)" is a caller written here that
# calls each entry of GoTensor's table as a C extension would.
TVM = "tvm-ffi (apache-tvm-ffi)"
CASES.update({
    "test_go_tensor_type_publishes_a_1_3_table": ("C (ctypes)", "exchange table", "GoTensor.__dlpack_c_exchange_api__: capsule \"dlpack_exchange_api\" on the type, version 1.3, prev_api NULL, every entry set"),
    "test_managed_tensor_from_py_object": ("C (ctypes)", "exchange table", "managed_tensor_from_py_object_no_sync: zero copy, shape/strides, READ_ONLY kept; one export per object, a new lent tensor per call, each deleter once, the export released with the object"),
    "test_entries_refuse_objects_not_ours": ("C (ctypes)", "exchange table", "objects of other types (NumPy, None, int, tvm-ffi, an impostor carrying our capsule): TypeError; freed GoTensor: BufferError; subclasses accepted"),
    "test_managed_tensor_to_py_object": ("C (ctypes)", "exchange table", "managed_tensor_to_py_object_no_sync: a new GoTensor owning the tensor, zero copy"),
    "test_lent_tensors_released_on_many_threads": ("C (ctypes)", "exchange table", "800 lent tensors released on 8 threads without the GIL while the object dies: the export released exactly once"),
    "test_to_py_releases_a_tensor_it_refuses": ("C (ctypes)", "exchange table", "to_py of a malformed tensor (major 2, ndim -1): BufferError, the stolen tensor released once"),
    "test_dltensor_view_lives_as_long_as_the_object": ("C (ctypes)", "exchange table", "dltensor_from_py_object_no_sync: the object's export, same shape storage each call; a lent tensor keeps it after the object died, the last to let go releases it; read-only refused (BufferError)"),
    "test_allocator_and_stream": ("C (ctypes)", "exchange table", "allocator: zeroed, 256-byte aligned, CPU only (SetError BufferError); current_work_stream NULL for every device"),
    "test_tvm_ffi_takes_go_memory_through_the_table": (TVM, "Go → tvm-ffi", "from_dlpack through the table (no __dlpack__ call): zero copy, shape/strides/dtype, writes reach Go, deleter once"),
    "test_tvm_ffi_falls_back_to_dlpack_without_the_table": (TVM, "Go → tvm-ffi", "type without the table: __dlpack__() (legacy), same values, zero copy"),
    "test_tvm_ffi_every_dtype_through_the_table": (TVM, "Go → tvm-ffi", "dtype through the table, bit for bit, zero copy"),
    "test_tvm_ffi_takes_read_only_go_memory_flagged": (TVM, "Go → tvm-ffi", "read-only Go memory: handed over shared with READ_ONLY; tvm-ffi 0.1.15 keeps no flags, so its tensor (and NumPy's array of it) is writable: a tvm-ffi limitation, where __dlpack__ gives a copy"),
    "test_tvm_ffi_functions_take_and_return_go_tensors": (TVM, "both", "a tvm-ffi function called with a GoTensor: argument through from_py, result returned as a GoTensor through to_py, same memory"),
    "test_tvm_ffi_allocates_through_our_allocator": (TVM, "Go → tvm-ffi", "during a call with a GoTensor argument TVMFFIEnvTensorAlloc uses our allocator; released once"),
    "test_tvm_tensors_come_into_go_through_their_table": (TVM, "tvm-ffi → Go", "DLTensorTestWrapper's table used (no __dlpack__), zero copy, tvm-ffi's reference released once; tvm_ffi.Tensor (no table): __dlpack__"),
    "test_no_python_objects_leak": (TVM, "both", "5,000 rounds of each exchange: no Python object, reference or memory left behind"),
})

# Cases that are not run, each with its reason.
NOT_RUN = [
    ("PyTorch", "both", "not run: PyTorch (whose tensors publish __dlpack_c_exchange_api__) is not in the test venv; tvm-ffi is the table peer, both ways"),
    ("pydlpack 0.2.1 (versioned)", "both", "refused: its versioned mode labels a DLManagedTensorVersioned capsule \"dltensor\"; "
     "a consumer must trust the name (NumPy 2.4.6 fails on it too), so it is not exchanged"),
    ("pyarrow", "Go → pyarrow", "refused: pyarrow has no DLPack importer"),
    ("PyTorch, CuPy, JAX on CUDA", "both", "not run: no GPU machine was lent to this task; the CUDA cases need one"),
    ("Rust dlpark 0.10.0", "both", "run by the Go tests of internal/dlparkpeer (make test), not here: every Go element type both ways bit for bit (bool, int8..64, uint8..64, float16/32/64, bfloat16, float8 e4m3fn/e5m2, complex64/128), versioned and legacy import, negative-stride, zero-size and Buffer exports, 100,000-round soak each way"),
]


def pytest_runtest_logreport(report):
    matrix.record(report)


def pytest_sessionfinish(session):
    import jax
    import numpy
    import pyarrow
    import tvm_ffi

    peers = (f"NumPy {numpy.__version__}, JAX {jax.__version__} (CPU, x64 enabled), pyarrow {pyarrow.__version__}, "
             f"pydlpack 0.2.1 (legacy mode), tvm-ffi {tvm_ffi.__version__} (C exchange API), Rust dlpark 0.10.0 (Go tests); the oldest NumPy 2.x, 2.0.2, in "
             "[interop-matrix-numpy20.md](interop-matrix-numpy20.md)")
    matrix.write("Interoperability matrix", peers, CASES, NOT_RUN)
