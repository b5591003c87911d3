#!/usr/bin/env bash
# Side-by-side DLPack exchange costs measured in one run on this machine:
# the C floor, this library's paths, NumPy's from_dlpack round trip and the
# Rust dlpark crate's round trip; then the DLPack 1.3 C exchange API in
# Python against __dlpack__ (bench/exchange_compare.py). Run it as `make
# compare`. It installs what it needs: a virtualenv with NumPy and tvm-ffi
# (.venv-bench), the dlpark crate, and the c-shared library of
# examples/python.
set -euo pipefail
cd "$(dirname "$0")/.."
NUMPY_VERSION=${NUMPY_VERSION:-2.4.6}
COUNT=${COUNT:-7}

echo "== building the peers" >&2
if [ ! -x .venv-bench/bin/python ]; then
	python3 -m venv .venv-bench >&2
fi
TVM_FFI_VERSION=${TVM_FFI_VERSION:-0.1.15.post2}
.venv-bench/bin/python -m pip install -q "numpy==$NUMPY_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION" >&2
go build -buildmode=c-shared -o .build/libgodlpack.so ./examples/python/libgodlpack >&2
cargo build -q --release --manifest-path bench/dlpark/Cargo.toml >&2

echo "== measuring (Go benchmarks x$COUNT, then NumPy, then dlpark)" >&2
gobench=$(go test -run '^$' -bench '^Benchmark(CFloor|ImportClose|ImportCloseLegacy|BorrowSlice|BorrowBatch|ExportRelease|ExportReleaseWarmCThread|BufferExportReleaseWarmCThread|GoToGo|ProtocolGoToGo|ProtocolProduce)$' -count "$COUNT" .)
numpy_ns=$(.venv-bench/bin/python bench/numpy_roundtrip.py)
dlpark_ns=$(bench/dlpark/target/release/dlpark-roundtrip)

median() { # name -> median ns/op of the Go benchmark
	echo "$gobench" | awk -v n="Benchmark$1-" 'index($1, n) == 1 { print $3 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
floor=$(median CFloor)

row() { printf '| %s | %s | %.1f | %.1f× |\n' "$1" "$2" "$3" "$(echo "$3 / $floor" | bc -l)"; }
echo "| path | what one op is | ns/op (median) | × C floor |"
echo "|---|---|---|---|"
row "C floor" "C produces, consumes and frees a 32×32 float32 tensor (our header, no Go)" "$floor"
row "Go: Borrow (scoped import)" "C produces; Go validates, views as []float32, releases" "$(median BorrowSlice)"
row "Go: BorrowBatch, 64 per call" "C produces 64 per call; Go validates and views each, releases all in one call (per tensor)" "$(median BorrowBatch)"
row "Go: Import + Close (owned)" "as above with the owned import and its cleanup safety net" "$(median ImportClose)"
row "Go: ImportLegacy + Close" "the same for a legacy tensor with NULL strides" "$(median ImportCloseLegacy)"
row "Go: Export + C release" "Go lends a slice; C reads the header and calls the deleter" "$(median ExportRelease)"
row "Go: Export + release on a warm C thread" "the deleter runs on a thread created in C" "$(median ExportReleaseWarmCThread)"
row "Go: Buffer export + release on a warm C thread" "the same for C-heap memory: the deleter is pure C" "$(median BufferExportReleaseWarmCThread)"
row "Go: Go -> Go round trip" "Export, then Borrow + Slice of the same tensor" "$(median GoToGo)"
row "Go: protocol, Go -> Go (From)" "From(an Array), Slice, Close: no C, no pinning, no handle" "$(median ProtocolGoToGo)"
row "Go: protocol, Produce + C release" "an Array handed to a C consumer by Produce; C reads the header and calls the deleter" "$(median ProtocolProduce)"
row "NumPy $NUMPY_VERSION: np.from_dlpack(x)" "versioned capsule out of NumPy and back in, array dropped" "$numpy_ns"
row "Rust dlpark 0.10.0: round trip" "export (Arc-shared data), into_raw, from_raw, validate, slice, drop" "$dlpark_ns"

echo
echo "== the C exchange API against __dlpack__ (same objects, one process)" >&2
GODLPACK_LIB="$PWD/.build/libgodlpack.so" PYTHONPATH="$PWD/examples/python" OPENBLAS_NUM_THREADS=1 \
	.venv-bench/bin/python bench/exchange_compare.py
