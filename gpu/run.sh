#!/usr/bin/env bash
# The GPU suite, run on a machine with an NVIDIA GPU and PyTorch (CUDA),
# CuPy and JAX (CUDA) for its python3. `make gpu-build` stages everything it
# needs into .build/gpu (the c-shared library, godlpack.py, the tests, this
# script); the device tool then runs, in the repository root there,
#
#     bash .build/gpu/run.sh          (carry: [".build/gpu"])
#
# It writes into $OUT (or .build/gpu/out): interop-matrix-gpu.md (the
# matrix, committed as docs/interop-matrix-gpu.md), pytest.log and
# nvidia-smi.txt. It exits non-zero if a case failed, and without writing a
# matrix if there is no CUDA device (then every case would skip).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$here/libgodlpack.so" ]; then
	stage="$here"
else
	stage="$(cd "$here/.." && pwd)/.build/gpu"
fi
if [ ! -f "$stage/libgodlpack.so" ] || [ ! -d "$stage/tests_gpu" ]; then
	echo "gpu/run.sh: $stage is not staged: run 'make gpu-build' and carry .build/gpu" >&2
	exit 2
fi
out="${OUT:-$stage/out}"
mkdir -p "$out"
python="${PYTHON:-python3}"

if ! nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
	echo "gpu/run.sh: nvidia-smi failed: no NVIDIA GPU here" >&2
	cat "$out/nvidia-smi.txt" >&2
	exit 3
fi
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
	echo "gpu/run.sh: $python has no PyTorch with CUDA" >&2
	exit 3
fi

export GODLPACK_LIB="$stage/libgodlpack.so"
export PYTHONPATH="$stage/python:$stage/tests_gpu${PYTHONPATH:+:$PYTHONPATH}"
export GODLPACK_GPU_MATRIX="$out/interop-matrix-gpu.md"
export GODLPACK_COMMIT="$(cat "$stage/COMMIT" 2>/dev/null)"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1

timeout_arg=()
if "$python" -c 'import pytest_timeout' 2>/dev/null; then
	timeout_arg=(--timeout=300)
fi
cd "$stage"
"$python" -m pytest -v -rs -p no:cacheprovider "${timeout_arg[@]}" tests_gpu 2>&1 | tee "$out/pytest.log"
rc=${PIPESTATUS[0]}
if [ -f "$GODLPACK_GPU_MATRIX" ]; then
	echo "== matrix: $GODLPACK_GPU_MATRIX"
	cat "$GODLPACK_GPU_MATRIX"
fi
exit "$rc"
