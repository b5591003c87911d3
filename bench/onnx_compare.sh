#!/usr/bin/env bash
# ONNX Runtime with a fresh output shape on every run, dlonnx beside ONNX
# Runtime's Python API (sess.run and IOBinding) on the same model (Y = X *
# X) and inputs, at 4 KiB and 64 MiB; prints a Markdown table. Run it as
# `make compare-onnx` (part of `make compare`): it needs the test venv
# (onnxruntime, onnx) and writes the models to .build/onnx.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
COUNT=${COUNT:-5}
models=$PWD/.build/onnx
"$PY" dlonnx/testdata/models.py "$models" >&2
lib=$("$PY" -c 'import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*")))[0])')

# Rounds alternate between Go and Python so that both see the same load
# on a shared machine; each figure is the median over the rounds.
echo "== measuring: $COUNT rounds of dlonnx (Go benchmarks) then ONNX Runtime's Python API" >&2
ONNXRUNTIME_LIB=$lib DLONNX_MODELS=$models go test -c -o .build/dlonnx.test ./dlonnx
gobench= python=
for _ in $(seq "$COUNT"); do
	for size in "4KiB 20000x" "64MiB 20x"; do
		set -- $size
		gobench+=$'\n'$(cd dlonnx && ONNXRUNTIME_LIB=$lib DLONNX_MODELS=$models ../.build/dlonnx.test -test.run '^$' \
			-test.bench "^BenchmarkFreshOutput\$/.*/$1\$" -test.benchtime "$2")
	done
	python+=$'\n'$("$PY" bench/onnx_compare.py "$models" 1)
done

median() { # name -> median ns/op of the Go benchmark
	echo "$gobench" | awk -v n="BenchmarkFreshOutput/$1-" 'index($1, n) == 1 { print $3 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
py() { # name -> median ns per run of the Python side
	echo "$python" | awk -v n="$1" '$1 == n { print $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

row() { # label, what, small ns, large ns
	printf '| %s | %s | %.1f | %.2f× | %.1f | %.2f× |\n' "$1" "$2" "$(echo "$3 / 1000" | bc -l)" "$(echo "$3 / $run_small" | bc -l)" \
		"$(echo "$4 / 1000000" | bc -l)" "$(echo "$4 / $run_large" | bc -l)"
}
run_small=$(py sess.run/4KiB)
run_large=$(py sess.run/64MiB)
echo "| path | one run, fresh output shape each time | 4 KiB µs | × sess.run | 64 MiB ms | × sess.run |"
echo "|---|---|---|---|---|---|"
row "ORT Python: sess.run" "InferenceSession.run, the result a NumPy array" "$run_small" "$run_large"
row "ORT Python: IOBinding" "bind_cpu_input, bind_output left to ORT, run_with_iobinding, get_outputs" "$(py iobinding/4KiB)" "$(py iobinding/64MiB)"
row "dlonnx: Session.Run" "ToValue on the input, Run (output from ORT's arena, adopted), dlpack.From + Close" "$(median run/4KiB)" "$(median run/64MiB)"
row "dlonnx: NewOutput + RunInto" "OutputShapes, a new zeroed C buffer per run, RunInto, dlpack.From + Close" "$(median newoutput/4KiB)" "$(median newoutput/64MiB)"
row "dlonnx: Pool + RunInto" "OutputShapes, a Pool's buffer (kept by size class, not zeroed), RunInto, dlpack.From + Close" "$(median pool/4KiB)" "$(median pool/64MiB)"
row "onnxruntime_go: Run, output left to it" "the output copied into Go memory by onnxruntime_go" "$(median ort/4KiB)" "$(median ort/64MiB)"
