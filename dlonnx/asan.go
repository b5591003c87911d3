//go:build cgo && asan

package dlonnx

// Under -asan, the sanitizer's __cxa_throw interceptor finds the real
// function only in libraries present at start-up; ONNX Runtime, loaded
// later, throws (and catches) C++ exceptions for its errors. Linking
// libstdc++ into the program makes the real __cxa_throw known.

// #cgo LDFLAGS: -lstdc++
import "C"
