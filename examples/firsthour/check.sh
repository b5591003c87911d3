#!/usr/bin/env bash
# The first hour of a new user, as a test: a copy of this folder outside
# the repository, with the repository beside it as ../dlpack, gets its
# go.mod from the README's "Depending on it" lines, run as written there
# (the dlflight line once more for dlgonum), after which its three
# programs build and run against the real peers:
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
cp -r "$here"/. "$tmp/firsthour"
cd "$tmp/firsthour"

# The README's blocks, in order: the core first (st2c needs nothing more),
# then the bridges and the tools.
blocks=$(awk '/^## Depending on it/ { on = 1; next } /^## / { on = 0 } on && /^```sh/ { n++; b = 1; next } b && /^```/ { b = 0; next } on && b { print n "\t" $0 }' "$root/README.md")
[ "$(cut -f1 <<< "$blocks" | sort -u | wc -l)" -ge 2 ] || { echo "README: no two sh blocks under 'Depending on it'"; exit 1; }
run() { echo "\$ $1"; eval "${1/#go /$GO }"; }
mv flight topy "$tmp/"
while IFS=$'\t' read -r n line; do
	if [ "$n" != 1 ] && [ ! -d flight ]; then mv "$tmp/flight" "$tmp/topy" .; fi
	run "$line"
	if [[ $line == *dlflight* ]]; then run "${line//dlflight/dlgonum}"; fi
done <<< "$blocks"

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
echo "== the first hour: all three done"
