#!/usr/bin/env bash
# Builds and tests this module as another project would: from a copy
# outside the repository whose go.mod replaces the library with a copy of
# this checkout; first normally, then vendored (`go mod vendor`) with the
# library's copy deleted, so that only vendor/ can supply it. Each run
# includes the CGO_CFLAGS route (package viaflags). The vendored build is
# also tested under -race, GOEXPERIMENT=cgocheck2 and -asan.
set -euo pipefail
GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
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
$GO mod edit -replace "github.com/godlpack/dlpack=$tmp/dlpack"

cflags() { echo "-I$($GO list "$@" -f '{{.Dir}}' github.com/godlpack/dlpack)/include"; }

echo "-- the generated header copies are current (go tool dlpack-header -check)"
for d in cprod mixed; do $GO tool dlpack-header -check -o "$d"; done

echo "-- module mode: vet, test, the CGO_CFLAGS route"
$GO vet ./...
$GO test -count=1 ./...
CGO_CFLAGS="-O2 -g $(cflags)" $GO test -count=1 -tags dlpack_cflags ./viaflags

echo "-- vendored: go mod vendor, the library's copy removed"
$GO mod vendor
rm -rf "$tmp/dlpack"
test -f vendor/github.com/godlpack/dlpack/include/dlpack/dlpack.h
$GO generate -mod=vendor ./...
$GO build -mod=vendor ./...
$GO test -mod=vendor -count=1 ./...
CGO_CFLAGS="-O2 -g $(cflags -mod=vendor)" $GO test -mod=vendor -count=1 -tags dlpack_cflags ./viaflags
echo "-- vendored, -race"
$GO test -mod=vendor -count=1 -race ./...
echo "-- vendored, GOEXPERIMENT=cgocheck2"
GOEXPERIMENT=cgocheck2 $GO test -mod=vendor -count=1 ./...
echo "-- vendored, -asan"
$GO test -mod=vendor -count=1 -asan ./...
