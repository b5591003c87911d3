module github.com/godlpack/dlpack/dlonnx

go 1.25.0

require (
	github.com/godlpack/dlpack v0.1.0
	github.com/stretchr/testify v1.12.1
	github.com/yalue/onnxruntime_go v1.27.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
