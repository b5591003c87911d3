#!/usr/bin/env bash
# Builds and tests a downstream module as another project would: from a
# copy outside the repository whose go.mod replaces the library's modules
# with a copy of this checkout (no go.work); first normally, then vendored
# (`go mod vendor`) with the library's copy deleted, so that only vendor/
# can supply it. The vendored build is also tested under -race and
# GOEXPERIMENT=cgocheck2 (core: and -asan). Before that, the module's graph
# (`go list -m all`) is checked for modules it must not pull.
#
#   check.sh core     examples/downstream/core: the core module alone;
#                     includes the generated header and the CGO_CFLAGS
#                     route (package viaflags)
#   check.sh flight   examples/downstream/flight: the core and dlflight
set -euo pipefail
GO=${GO:-go}
which=${1:?usage: check.sh core|flight}
here=$(cd "$(dirname "$0")/$which" && pwd)
root=$(cd "$here/../../.." && pwd)
version=$(cat "$root/VERSION")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOFLAGS= GOWORK=off

mkdir "$tmp/dlpack"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
	xargs -0 cp --parents -t "$tmp/dlpack")
mkdir "$tmp/downstream"
(cd "$here" && git ls-files -z --cached --others --exclude-standard . |
	while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
	xargs -0 cp --parents -t "$tmp/downstream")
cd "$tmp/downstream"
$GO mod edit -require="github.com/godlpack/dlpack@$version" -replace="github.com/godlpack/dlpack=$tmp/dlpack"
if [ "$which" = flight ]; then
	$GO mod edit -require="github.com/godlpack/dlpack/dlflight@$version" -replace="github.com/godlpack/dlpack/dlflight=$tmp/dlpack/dlflight" \
		-replace="github.com/godlpack/dlpack/dlgrpc=$tmp/dlpack/dlgrpc"
fi

echo "-- go mod tidy changes nothing; the module graph holds only what it needs"
$GO mod tidy -diff
graph=$($GO list -m all)
echo "   $(wc -l <<< "$graph") modules in go list -m all"
case $which in
core) forbidden='google.golang.org/grpc|google.golang.org/protobuf|google.golang.org/genproto|github.com/apache/arrow-go|github.com/gomlx|github.com/yalue/onnxruntime_go|gonum.org/v1/gonum|github.com/schollz/progressbar|github.com/godlpack/dlpack/' ;;
flight) forbidden='github.com/gomlx|github.com/yalue/onnxruntime_go|github.com/schollz/progressbar|github.com/godlpack/dlpack/(dlarrow|dlgomlx|dlgonum|dlonnx|cmd)' ;;
esac
if bad=$(grep -E "^($forbidden)" <<< "$graph"); then
	echo "the $which downstream module's graph holds modules it does not need:"; echo "$bad"; exit 1
fi

cflags() { echo "-I$($GO list "$@" -f '{{.Dir}}' github.com/godlpack/dlpack)/include"; }

if [ "$which" = core ]; then
	echo "-- the generated header copies are current (go tool dlpack-header -check)"
	for d in cprod mixed; do $GO tool dlpack-header -check -o "$d"; done
fi

echo "-- module mode: vet, test"
$GO vet ./...
$GO test -count=1 ./...
if [ "$which" = core ]; then
	echo "-- the CGO_CFLAGS route"
	CGO_CFLAGS="-O2 -g $(cflags)" $GO test -count=1 -tags dlpack_cflags ./viaflags
fi

echo "-- vendored: go mod vendor, the library's copy removed"
$GO mod vendor
rm -rf "$tmp/dlpack"
test -f vendor/github.com/godlpack/dlpack/include/dlpack/dlpack.h
$GO generate -mod=vendor ./...
$GO build -mod=vendor ./...
$GO test -mod=vendor -count=1 ./...
if [ "$which" = core ]; then
	CGO_CFLAGS="-O2 -g $(cflags -mod=vendor)" $GO test -mod=vendor -count=1 -tags dlpack_cflags ./viaflags
fi
echo "-- vendored, -race"
$GO test -mod=vendor -count=1 -race ./...
echo "-- vendored, GOEXPERIMENT=cgocheck2"
GOEXPERIMENT=cgocheck2 $GO test -mod=vendor -count=1 ./...
if [ "$which" = core ]; then
	echo "-- vendored, -asan"
	$GO test -mod=vendor -count=1 -asan ./...
fi
