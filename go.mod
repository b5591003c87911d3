module github.com/godlpack/dlpack

go 1.25.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/x448/float16 v0.8.4
	golang.org/x/sys v0.47.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
