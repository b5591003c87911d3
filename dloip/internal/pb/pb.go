// Package pb is the Open Inference Protocol's gRPC messages and service,
// generated from oip.proto by generate.sh (protoc from grpcio-tools, the
// pinned protoc-gen-go and protoc-gen-go-grpc). make oip checks that
// regenerating changes nothing.
package pb

//go:generate ./generate.sh
