#!/usr/bin/env bash
# Regenerates oip.pb.go and oip_grpc.pb.go from oip.proto with the pinned
# tools: protoc from grpcio-tools (PROTOC_PYTHON, a Python with
# grpcio-tools installed, see requirements-protoc.txt) and the Go plugins at
# the versions below, installed into $PLUGIN_BIN (default ../../../.build/bin).
# OUT, when set, is the folder to write into instead of this one.
set -euo pipefail
cd "$(dirname "$0")"
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PY=${PROTOC_PYTHON:-../../../.venv-protoc/bin/python}
BIN=$(mkdir -p "${PLUGIN_BIN:-../../../.build/bin}" && cd "${PLUGIN_BIN:-../../../.build/bin}" && pwd)
GOBIN=$BIN GOWORK=off GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO" "$PROTOC_GEN_GO_GRPC" 2>/dev/null || {
	GOBIN=$BIN GOWORK=off GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO"
	GOBIN=$BIN GOWORK=off GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO_GRPC"
}
OUT=${OUT:-.}
PATH=$BIN:$PATH "$PY" -m grpc_tools.protoc -I . \
	--go_out="$OUT" --go_opt=paths=source_relative \
	--go-grpc_out="$OUT" --go-grpc_opt=paths=source_relative \
	oip.proto
