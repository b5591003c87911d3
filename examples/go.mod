module github.com/godlpack/dlpack/examples

go 1.26.0

require (
	github.com/apache/arrow-go/v18 v18.8.0
	github.com/godlpack/dlpack v0.1.0
	github.com/godlpack/dlpack/dlarrow v0.1.0
	github.com/godlpack/dlpack/dlflight v0.1.0
	github.com/godlpack/dlpack/dlgomlx v0.1.0
	github.com/godlpack/dlpack/dlgonum v0.1.0
	github.com/godlpack/dlpack/dlgrpc v0.1.0
	github.com/gomlx/gomlx v0.26.0
	gonum.org/v1/gonum v0.17.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/goccy/go-json v0.10.6 // indirect
	github.com/google/flatbuffers v25.12.19+incompatible // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.29 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/exp v0.0.0-20260112195511-716be5621a96 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
