#!/usr/bin/env bash
# The first hour of a new user, as a test: an empty module outside the
# repository (go mod init, no code), with the repository beside it as
# ../dlpack, gets its requirements from the README's "Depending on it"
# lines, run as written there (each dlflight line once more for
# dlgonum); only then are this folder's three programs copied in, and
# they build and run against the real peers, with no go mod tidy between:
#
#   st2c    a safetensors file written by Python's safetensors, mapped by
#           Go, summed by C in place (the header from go tool dlpack-header)
#   flight  a Go tensor served by dlflight, fetched by the pyarrow.flight
#           client of docs/beyond-one-process.md
#   topy    an image and a gonum matrix to NumPy through the loader go tool
#           dlpack-python writes (docs/python.md)
#
# Each must end with nothing outstanding. PY names a Python with NumPy,
# pyarrow and safetensors (make firsthour passes the venv's).
set -euo pipefail
GO=${GO:-go}
PY=${PY:?PY must name a Python with NumPy, pyarrow and safetensors (make firsthour sets it)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOFLAGS= GOWORK=off
ln -s "$root" "$tmp/dlpack"
mkdir "$tmp/firsthour"
cd "$tmp/firsthour"
run() { echo "\$ $1"; eval "${1/#go /$GO }"; }
run "go mod init example.com/firsthour"

# The README's blocks, in order, in the module with no code yet: the
# core, then the bridges and the tools.
blocks=$(awk '/^## Depending on it/ { on = 1; next } /^## / { on = 0 } on && /^```sh/ { n++; b = 1; next } b && /^```/ { b = 0; next } on && b { print n "\t" $0 }' "$root/README.md")
[ "$(cut -f1 <<< "$blocks" | sort -u | wc -l)" -ge 2 ] || { echo "README: no two sh blocks under 'Depending on it'"; exit 1; }
while IFS=$'\t' read -r n line; do
	run "$line"
	if [[ $line == *dlflight* ]]; then run "${line//dlflight/dlgonum}"; fi
done <<< "$blocks"
for m in github.com/godlpack/dlpack github.com/godlpack/dlpack/dlflight github.com/godlpack/dlpack/dlgonum; do
	$GO list -m "$m" > /dev/null || { echo "after the README's lines, go.mod does not require $m:"; cat go.mod; exit 1; }
done

echo "-- the programs, written after the README's lines"
(cd "$here" && cp -r doc.go st2c flight topy "$tmp/firsthour/")

echo "-- go generate, vet"
$GO generate ./...
$GO vet ./...

echo "-- st2c: a safetensors file to C"
$PY -c 'import sys, numpy as np, safetensors.numpy; safetensors.numpy.save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4)}, sys.argv[1])' w.safetensors
out=$($GO run ./st2c w.safetensors); echo "$out"
grep -q '^shared with the mapping: true, read-only: true$' <<< "$out"
grep -q '^C sum: 66$' <<< "$out"
grep -q '^done: outstanding exports 0, live mappings 0$' <<< "$out"

echo "-- flight: a Flight tensor to a pyarrow client"
out=$($GO run ./flight "$PY" flight/client.py); echo "$out"
grep -q '^pyarrow: weights as Go sent them$' <<< "$out"
grep -q '^done: outstanding exports 0$' <<< "$out"

echo "-- topy: an image and a gonum matrix to NumPy through the generated loader"
$GO build -buildmode=c-shared -o topy/libtopy.so ./topy
out=$(PYTHONPATH=topy $PY topy/use.py); echo "$out"
grep -q '^done: outstanding exports 0$' <<< "$out"
echo "-- go mod tidy, now that the code imports them: every requirement stays"
$GO mod tidy
for m in github.com/godlpack/dlpack github.com/godlpack/dlpack/dlflight github.com/godlpack/dlpack/dlgonum; do
	grep -qE "^(require )?[[:space:]]*$m v" go.mod || { echo "go mod tidy dropped $m:"; cat go.mod; exit 1; }
done
$GO build ./...
echo "== the first hour: all three done"
