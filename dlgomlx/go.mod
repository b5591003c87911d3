module github.com/godlpack/dlpack/dlgomlx

go 1.25.0

require (
	github.com/godlpack/dlpack v0.1.0
	github.com/gomlx/gomlx v0.26.0
	github.com/x448/float16 v0.8.4
)

require (
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mattn/go-runewidth v0.0.20 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/schollz/progressbar/v3 v3.19.1 // indirect
	golang.org/x/exp v0.0.0-20260112195511-716be5621a96 // indirect
	golang.org/x/term v0.45.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
