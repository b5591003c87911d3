#!/usr/bin/env bash
# Side-by-side DLPack exchange costs measured in one run on this machine:
# the C floor, this library's paths, NumPy's and pyarrow's from_dlpack
# round trips and the Rust dlpark crate's round trip; then tensor files
# beside NumPy and safetensors, the GoMLX bridge beside GoMLX's own
# copying paths, the DLPack 1.3 C exchange API in Python against
# __dlpack__ (bench/exchange_compare.py), and Arrow Flight (dlflight)
# beside pyarrow.flight with the shared-file row. Run it as `make
# compare`. It installs what it needs: a virtualenv with NumPy, pyarrow,
# safetensors and tvm-ffi (.venv-bench), the dlpark crate, and the c-shared library of
# examples/python.
set -euo pipefail
cd "$(dirname "$0")/.."
NUMPY_VERSION=${NUMPY_VERSION:-2.4.6}
PYARROW_VERSION=${PYARROW_VERSION:-26.0.1}
COUNT=${COUNT:-7}

echo "== building the peers" >&2
if [ ! -x .venv-bench/bin/python ]; then
	python3 -m venv .venv-bench >&2
fi
TVM_FFI_VERSION=${TVM_FFI_VERSION:-0.1.15.post2}
.venv-bench/bin/python -m pip install -q "numpy==$NUMPY_VERSION" "pyarrow==$PYARROW_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION" >&2
go build -buildmode=c-shared -o .build/libgodlpack.so ./examples/python/libgodlpack >&2
cargo build -q --release --manifest-path bench/dlpark/Cargo.toml >&2

echo "== measuring (Go benchmarks x$COUNT, then NumPy)" >&2
gobench=$(go test -run '^$' -bench '^Benchmark(CFloor|ImportClose|ImportCloseLegacy|SafetyNet|BorrowSlice|BorrowBatch|ExportRelease|ExportReleaseWarmCThread|BufferExportReleaseWarmCThread|GoToGo|ProtocolGoToGo|ProtocolProduce)$' -count "$COUNT" .)
gobench+=$'\n'$(go test -run '^$' -bench '^BenchmarkArrowProduce$' -count "$COUNT" ./dlarrow)
numpy_ns=$(.venv-bench/bin/python bench/numpy_roundtrip.py)
# The targets compare two measurements each (a Go path and the C floor,
# dlpark or pyarrow). On a shared host the load moves between runs
# minutes apart, so the two sides of each target are measured in rounds,
# one run of each per round, and the medians of those rounds judged.
echo "== measuring the targets ($COUNT interleaved rounds)" >&2
go test -c -o .build/dlpack.test . >&2
go test -c -o .build/dlarrow.test ./dlarrow >&2
rounds=""
for _ in $(seq "$COUNT"); do
	rounds+=$(.build/dlpack.test -test.run '^$' -test.bench '^Benchmark(CFloor|ExportRelease|ImportClose|SafetyNet|ProtocolGoToGo)$' |
		awk '/^Benchmark/ { sub(/-[0-9]+$/, "", $1); print $1, $3 }')$'\n'
	rounds+="dlpark $(bench/dlpark/target/release/dlpark-roundtrip)"$'\n'
	rounds+=$(.build/dlarrow.test -test.run '^$' -test.bench '^BenchmarkArrowProduce$' |
		awk '/^Benchmark/ { sub(/-[0-9]+$/, "", $1); print $1, $3 }')$'\n'
	rounds+="pyarrow $(.venv-bench/bin/python bench/pyarrow_roundtrip.py)"$'\n'
done
round() { # name -> median ns/op over the rounds
	printf '%s' "$rounds" | awk -v n="$1" '$1 == n { print $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
dlpark_ns=$(round dlpark)
pyarrow_ns=$(round pyarrow)

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
row "Go: the safety net alone" "what Import + Close spend on it: the import entered in its goroutine's slab and taken out at Close; a slab per 64 imports, which needs no cleanup when they are all closed by then (no tensor)" "$(median SafetyNet)"
row "Go: Export + C release" "Go lends a slice; C reads the header and calls the deleter" "$(median ExportRelease)"
row "Go: Export + release on a warm C thread" "the deleter runs on a thread created in C" "$(median ExportReleaseWarmCThread)"
row "Go: Buffer export + release on a warm C thread" "the same for C-heap memory: the deleter is pure C" "$(median BufferExportReleaseWarmCThread)"
row "Go: Go -> Go round trip" "Export, then Borrow + Slice of the same tensor" "$(median GoToGo)"
row "Go: protocol, Go -> Go (From)" "From(an Array), Slice, Close: no C, no pinning, no handle" "$(median ProtocolGoToGo)"
row "Go: protocol, Produce + C release" "an Array handed to a C consumer by Produce; C reads the header and calls the deleter" "$(median ProtocolProduce)"
row "NumPy $NUMPY_VERSION: np.from_dlpack(x)" "versioned capsule out of NumPy and back in, array dropped" "$numpy_ns"
row "Go: Arrow column, Produce + C release" "an arrow-go float32 column (1024 values) handed to a C consumer by dlarrow; C reads the header and calls the deleter (Retain ... Release)" "$(median ArrowProduce)"
row "pyarrow $PYARROW_VERSION: np.from_dlpack(a)" "a pyarrow float32 array (1024 values) to NumPy through pyarrow's versioned capsule, array dropped (median of the $COUNT rounds)" "$pyarrow_ns"
row "Rust dlpark 0.10.0: round trip" "export (Arc-shared data), into_raw, from_raw, validate, slice, drop (median of the $COUNT rounds)" "$dlpark_ns"

# The targets of this table, judged on the interleaved rounds.
status() { # description, ns, reference ns, limit, strict (1: the ratio must be below the limit)
	local ratio met
	ratio=$(echo "$2 / $3" | bc -l)
	if [ "$5" = 1 ]; then met=$(echo "$ratio < $4" | bc -l); else met=$(echo "$ratio <= $4" | bc -l); fi
	if [ "$met" = 1 ]; then met=met; else met=missed; fi
	printf -- '- target: %s: %.1f / %.1f ns = %.2f× (limit %s×): **%s**\n' "$1" "$2" "$3" "$ratio" "$4" "$met"
}
echo
echo "Targets, from $COUNT rounds that each ran both sides of every target once, in turn (medians):"
echo
status "protocol Go → Go (From) at or under Rust dlpark's round trip" "$(round BenchmarkProtocolGoToGo)" "$dlpark_ns" 1.0 0
status "Export + C release at most 15× the C floor" "$(round BenchmarkExportRelease)" "$(round BenchmarkCFloor)" 15 0
status "owned Import + Close at most 13× the C floor" "$(round BenchmarkImportClose)" "$(round BenchmarkCFloor)" 13 0
net=$(round BenchmarkSafetyNet)
printf -- '  - of which the safety net (a slab entry, and a slab per 64 imports; measured alone in the same rounds): %.1f ns = %.1f× the floor; Import + Close without it: %.1f ns = %.2f× (limit 13×)\n' \
	"$net" "$(echo "$net / $(round BenchmarkCFloor)" | bc -l)" "$(echo "$(round BenchmarkImportClose) - $net" | bc -l)" \
	"$(echo "($(round BenchmarkImportClose) - $net) / $(round BenchmarkCFloor)" | bc -l)"
status "an Arrow column handed to C faster than pyarrow's np.from_dlpack(a)" "$(round BenchmarkArrowProduce)" "$pyarrow_ns" 1.0 1

# Tensor files (package tensorfile): open a file and take every tensor in
# it, for the same sparse files in Go, NumPy and safetensors.
echo "== tensor files (Go x$COUNT, then NumPy and safetensors)" >&2
.venv-bench/bin/python -m pip install -q "safetensors==0.8.0" >&2
tfdir=$(mktemp -d)
trap 'rm -rf "$tfdir"' EXIT
.venv-bench/bin/python bench/tensorfiles.py make "$tfdir"
tfgo=$(TENSORFILE_BENCH_DIR=$tfdir go test -run '^$' -bench '^BenchmarkOpenExport(Ratio)?$' -count "$COUNT" ./tensorfile)
tfpy=$(.venv-bench/bin/python bench/tensorfiles.py time "$tfdir")
tfgomedian() {
	echo "$tfgo" | awk -v n="BenchmarkOpenExport/$1-" 'index($1, n) == 1 { print $3 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
tfpyns() { echo "$tfpy" | awk -v n="$1" '$1 == n { print $2 }'; }
echo
echo "| file | Go: Open, dlpack.From + Close of every tensor, Close (µs, median) | NumPy $NUMPY_VERSION: np.load(f, mmap_mode=\"r\") (µs) | safetensors 0.8.0: safe_open + get_tensor of every tensor (µs) |"
echo "|---|---|---|---|"
for size in 1KiB 1GiB; do
	printf '| safetensors, 4 float32 tensors, %s | %.1f | | %.1f |\n' "$size" \
		"$(echo "$(tfgomedian "safetensors/$size") / 1000" | bc -l)" "$(echo "$(tfpyns "safetensors/$size") / 1000" | bc -l)"
	printf '| .npy, one float32 array, %s | %.1f | %.1f | |\n' "$size" \
		"$(echo "$(tfgomedian "npy/$size") / 1000" | bc -l)" "$(echo "$(tfpyns "npy/$size") / 1000" | bc -l)"
done
printf '| safetensors, 1000 float32 4×4 tensors | %.1f | | %.1f |\n' \
	"$(echo "$(tfgomedian "safetensors/1000tensors") / 1000" | bc -l)" "$(echo "$(tfpyns "safetensors/1000tensors") / 1000" | bc -l)"
# The ratio from BenchmarkOpenExportRatio, which alternates the two files in
# one loop so that both meet the same machine load.
tfratio() {
	echo "$tfgo" | awk -v n="BenchmarkOpenExportRatio/$1-" 'index($1, n) == 1 { for (i = 2; i < NF; i++) if ($(i + 1) == "1GiB/1KiB") print $i }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for f in safetensors npy; do
	printf '| %s: Go 1 GiB / 1 KiB (alternating, median) | %.2f× | | |\n' "$f" "$(tfratio "$f")"
done

# Opening a file of 10,000 tensors and listing their names, beside
# safetensors' safe_open + keys() on the same file, in interleaved rounds
# (one run of each per round), medians.
go test -c -o .build/tensorfile.test ./tensorfile >&2 # run in its package folder, as go test runs it (testdata)
tfnames=""
for _ in $(seq "$COUNT"); do
	tfnames+="go $(cd tensorfile && TENSORFILE_BENCH_DIR=$tfdir ../.build/tensorfile.test -test.run '^$' -test.bench '^BenchmarkOpenNames$' | awk '/^Benchmark/ { print $3 }')"$'\n'
	tfnames+="py $(.venv-bench/bin/python bench/tensorfiles.py names "$tfdir")"$'\n'
done
tfnamesmedian() {
	printf '%s' "$tfnames" | awk -v n="$1" '$1 == n { print $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf '| safetensors, 10,000 float32 4×4 tensors: open and list the names (Go: OpenSafetensors, Name of each, Close; safetensors: safe_open + keys()), %d interleaved rounds | %.1f | | %.1f |\n' \
	"$COUNT" "$(echo "$(tfnamesmedian go) / 1000" | bc -l)" "$(echo "$(tfnamesmedian py) / 1000" | bc -l)"
status "open a 10,000-tensor safetensors file and list its names at or under safe_open + keys()" "$(tfnamesmedian go)" "$(tfnamesmedian py)" 1.0 0

# GoMLX (package dlgomlx): the bridge beside GoMLX's own copying paths
# for 1 KiB, 1 MiB and 256 MiB of float32; the zero-copy rows must not
# grow with the size.
echo "== GoMLX bridge against GoMLX's copying paths (Go x$COUNT)" >&2
gmbench=$(go test -run '^$' -bench '^Benchmark(Out|In)$' -benchtime 200ms -count "$COUNT" ./dlgomlx)
gmmedian() {
	echo "$gmbench" | awk -v n="Benchmark$1-" 'index($1, n) == 1 { print $3 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
gmrow() {
	printf '| %s | %.0f | %.0f | %.0f |\n' "$1" "$(gmmedian "$2/1KiB")" "$(gmmedian "$2/1MiB")" "$(gmmedian "$2/256MiB")"
}
echo
echo "| GoMLX v0.26.0, one op (ns, median) | 1 KiB | 1 MiB | 256 MiB |"
echo "|---|---|---|---|"
gmrow "out, bridge: FromTensor, Produce, C release (shared)" Out/bridge-FromTensor-DLPack
gmrow "out, bridge: FromTensor, dlpack.From, Close (shared, Go to Go)" Out/bridge-FromTensor-From
gmrow "out, GoMLX: ConstFlatData copied to a slice (CopyFlatData)" Out/gomlx-ConstFlatData-copy
gmrow "out, bridge: CopyFromTensor (one copy, aligned)" Out/bridge-CopyFromTensor
gmrow "in, bridge: ToTensor on simplego (one copy, into the buffer an execution reads)" In/bridge-ToTensor-simplego
gmrow "in, GoMLX: FromFlatDataAndDimensions (one copy, local)" In/gomlx-FromFlatDataAndDimensions
gmrow "in, GoMLX: FromFlatDataAndDimensions + MaterializeOnDevice (two copies, as an execution does)" In/gomlx-FromFlatDataAndDimensions+device
gmrow "in, bridge: ToTensor of a FromTensor export (the tensor itself)" In/bridge-ToTensor-export
echo
echo "== the C exchange API against __dlpack__ (same objects, one process)" >&2
GODLPACK_LIB="$PWD/.build/libgodlpack.so" PYTHONPATH="$PWD/examples/python" OPENBLAS_NUM_THREADS=1 \
	.venv-bench/bin/python bench/exchange_compare.py

# Arrow Flight (package dlflight) on loopback, against pyarrow.flight, and
# the shared-file alternative (tensorfile.CreateNPY on /dev/shm). Each row
# is the median of single fetches on one warm connection. The two
# pyarrow.flight-client rows are timed in interleaved rounds (flight.py
# pair: both servers in turn, every round), so that they meet the same
# load; Go to Go runs as many fetches (BenchmarkFlightGet's
# median-MB/s). memcpy is the best of 3 runs of 5 copies.
echo "== Arrow Flight: Go and pyarrow.flight, loopback; shared file on /dev/shm" >&2
flgo=$(for sc in 1MiB:600 64MiB:20 256MiB:6; do
	go test -run '^$' -bench "^BenchmarkFlightGet\$/^${sc%:*}\$" -benchtime "${sc#*:}x" ./dlflight
done)
flgo+=$'\n'$(for sc in 64MiB:20 256MiB:6; do
	go test -run '^$' -bench "^BenchmarkFlightGetStreams\$/^${sc%:*}\$" -benchtime "${sc#*:}x" ./dlflight
done)
flgo+=$'\n'$(go test -run '^$' -bench '^BenchmarkMemcpy$' -benchtime 5x -count 3 ./dlflight)
go build -o .build/flightserve ./bench/flightserve >&2
shm=/dev/shm/dlflight-bench-$$.npy
coproc FLIGHTSERVE { .build/flightserve -shm "$shm"; }
read -r flport <&"${FLIGHTSERVE[0]}"
flpy=$(.venv-bench/bin/python bench/flight.py pair "$flport"; .venv-bench/bin/python bench/flight.py threads "$flport"; .venv-bench/bin/python bench/flight.py shm "$shm" "$flport")
exec {FLIGHTSERVE[1]}>&-
wait "$FLIGHTSERVE_PID" || true
rm -f "$shm"
flgobps() { # benchmark [unit] -> bytes/s (the best of the run's values)
	echo "$flgo" | awk -v n="Benchmark$1-" -v u="${2:-MB/s}" 'index($1, n) == 1 { for (i = 2; i <= NF; i++) if ($(i + 1) == u) printf "%.0f\n", $i * 1e6 }' | sort -g | tail -1
}
flpys() { echo "$flpy" | awk -v n="$1" '$1 == n { print $2 }'; }
echo
echo "| float32 tensor | path | GB/s (median fetch) | × memcpy | × pyarrow→pyarrow |"
echo "|---|---|---|---|---|"
fltargets=""
for size in 1MiB 64MiB 256MiB; do
	bytes=$(( ${size%MiB} * 1048576 ))
	mc=$(flgobps "Memcpy/$size")
	pp=$(echo "$bytes / $(flpys "py-server/$size")" | bc -l)
	gg=$(flgobps "FlightGet/$size" median-MB/s)
	gp=$(echo "$bytes / $(flpys "go-server/$size")" | bc -l)
	flrow() { printf '| %s | %s | %.2f | %.3f | %.2f |\n' "$size" "$1" "$(echo "$2 / 1000000000" | bc -l)" "$(echo "$2 / $mc" | bc -l)" "$(echo "$2 / $pp" | bc -l)"; }
	flrow "Go server → Go client (dlflight, one process)" "$gg"
	flrow "Go server → pyarrow.flight client" "$gp"
	flrow "pyarrow.flight server → pyarrow.flight client" "$pp"
	flrow "memcpy of the same bytes (Go copy)" "$mc"
	for row in "Go server → Go client:$gg" "Go server → pyarrow.flight client:$gp"; do
		r=$(echo "${row#*:} / $pp" | bc -l)
		met=missed
		if [ "$(echo "$r >= 1" | bc -l)" = 1 ]; then met=met; fi
		fltargets+=$(printf -- '- target: %s, %s, at least as fast as pyarrow→pyarrow: %.2f× (limit 1×): **%s**' "$size" "${row%%:*}" "$r" "$met")$'\n'
	done
done
echo
echo "Targets (medians of the rows above):"
printf '%s' "$fltargets"
# parallel endpoints: Go to Go on 1, 2 and 4 streams (BenchmarkFlightGetStreams,
# medians; cpu-s/GB is the process's CPU, server and client together), and
# a pyarrow.flight client fetching the endpoints on 4 threads
echo
echo "| float32 tensor | path | streams | GB/s (median fetch) | × one stream | × memcpy | CPU s/GB |"
echo "|---|---|---|---|---|---|---|"
flcpu() { echo "$flgo" | awk -v n="Benchmark$1-" 'index($1, n) == 1 { for (i = 2; i <= NF; i++) if ($(i + 1) == "cpu-s/GB") print $i }' | tail -1; }
for size in 64MiB 256MiB; do
	bytes=$(( ${size%MiB} * 1048576 ))
	mc=$(flgobps "Memcpy/$size")
	one=$(flgobps "FlightGetStreams/$size/streams=1" median-MB/s)
	for n in 1 2 4; do
		v=$(flgobps "FlightGetStreams/$size/streams=$n" median-MB/s)
		printf '| %s | Go server → Go client | %d | %.2f | %.2f | %.3f | %.2f |\n' "$size" "$n" "$(echo "$v / 1000000000" | bc -l)" \
			"$(echo "$v / $one" | bc -l)" "$(echo "$v / $mc" | bc -l)" "$(flcpu "FlightGetStreams/$size/streams=$n")"
	done
	v=$(echo "$bytes / $(flpys "py-threads/$size")" | bc -l)
	printf '| %s | Go server → pyarrow.flight client, endpoints on 4 threads | 4 | %.2f | %.2f | %.3f | |\n' "$size" "$(echo "$v / 1000000000" | bc -l)" \
		"$(echo "$v / $one" | bc -l)" "$(echo "$v / $mc" | bc -l)"
done
echo
echo "| 256 MiB float32, Go wrote it, Python sums it | seconds (best of 3) |"
echo "|---|---|"
printf '| shared file: tensorfile.CreateNPY on /dev/shm, filled in place; np.load(mmap_mode="r").sum() | %.3f |\n' "$(flpys shm/file)"
printf '| Flight: Go server → pyarrow.flight do_get + to_numpy_ndarray().sum() | %.3f |\n' "$(flpys shm/flight)"
