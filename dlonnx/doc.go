// Package dlonnx runs ONNX Runtime (through github.com/yalue/onnxruntime_go)
// on DLPack tensors without copying them, in and out.
//
// Into ONNX Runtime: ToValue makes an ONNX Runtime tensor over the memory
// of any DLPack producer (an imported dlpack.Foreign, a dlpack.Array or
// Buffer, another Tensor) when it is a compact, writable CPU tensor of a
// type ONNX Runtime has: int8 to int64, uint8 to uint64, float16, bfloat16
// (minifloat.Float16, minifloat.BFloat16), float32, float64, bool,
// float8_e4m3fn and float8_e5m2 (minifloat.E4M3FN, minifloat.E5M2).
// CopyToValue is the explicit copy for every other layout (strided,
// broadcast, negative strides) and for read-only tensors. A *Tensor is an
// onnxruntime_go Value: pass it to a session's Run as an input.
//
// Out of ONNX Runtime: NewOutput allocates a zeroed, 256-byte aligned C
// buffer that a session's Run writes its result into (pass it as an
// output), and every Tensor is a dlpack.Source and dlpack.Producer, so the
// result goes on to Go (dlpack.From), C (dlpack.Produce) or Python
// (pycapsule) without a copy. onnxruntime_go copies the outputs it
// allocates itself into Go memory; outputs made by NewOutput avoid that
// copy: ONNX Runtime writes straight into the memory the consumers get.
//
// # One lifetime
//
// A Tensor holds its own reference to the memory it shares (taken with
// dlpack.FromRequest), so the producer's Foreign may be closed at any time:
// the memory lives until Destroy and every consumer that received the
// Tensor through DLPack have let go, in any order. The last of them
// releases the ONNX Runtime value, unpins the memory and drops the
// reference (for a Foreign, that runs its producer's deleter once). A
// Tensor that becomes unreachable without Destroy is released by a
// cleanup; call Destroy anyway, as for every onnxruntime_go value.
//
// # The cgo pointer rules
//
// ONNX Runtime keeps the data pointer of a tensor made over caller memory
// (CreateTensorWithDataAsOrtValue) after the call that made it returns, and
// reads it in every Run. onnxruntime_go passes the slice it is given as it
// is. Memory outside the Go heap (C memory, mmap: tensors from NumPy,
// PyTorch, a dlpack.Buffer, NewOutput, CopyToValue) needs nothing more. Go
// heap memory (a dlpack.Array, a Go export coming back) is pinned with a
// runtime.Pinner from ToValue until the last release above, so C holds a
// Go pointer only while it is pinned, as the cgo rules require; the suite
// runs under GOEXPERIMENT=cgocheck2.
//
// # What ONNX Runtime does with the memory
//
// ONNX Runtime treats inputs as const: kernels read them and the memory
// planner never reuses a buffer the caller provided; it writes an output's
// buffer during Run. An ONNX Runtime tensor is nonetheless a writable
// object (GetTensorMutableData, onnxruntime_go's ZeroContents, binding as
// an output), so ToValue shares only writable memory and refuses
// read-only tensors with dlpack.ErrReadOnly; CopyToValue copies them.
//
// # Choices
//
// Outputs are made by the caller (NewOutput, with the shape the model
// gives: dynamic dimensions are the caller's to know) rather than by ONNX
// Runtime: onnxruntime_go copies every output it lets ONNX Runtime
// allocate into Go memory (and v1.27.0 fails for 2-byte custom types such
// as float16, copying one byte per element). A Tensor's GetData is its
// memory as bytes; an empty tensor gets one byte of the bridge's own,
// because onnxruntime_go wants one. 0-d tensors are refused
// (dlpack.ErrShape): onnxruntime_go makes none over given memory.
// onnxruntime_go v1.27.0 never frees the C copy of a model path
// (NewDynamicAdvancedSession); open models from their bytes
// (NewDynamicAdvancedSessionWithONNXData) where sessions come and go.
//
// # The library
//
// The package does not load ONNX Runtime: call ort.SetSharedLibraryPath
// and ort.InitializeEnvironment first, as onnxruntime_go requires. The
// onnxruntime wheel on PyPI ships the library (onnxruntime/capi/
// libonnxruntime.so.*); onnxruntime_go v1.27.0 uses C API version 24,
// which ONNX Runtime 1.24 and later provide. Without cgo (CGO_ENABLED=0)
// onnxruntime_go does not build; this package then offers the same
// functions without the onnxruntime_go Value methods, and they return
// dlpack.ErrCgoRequired.
package dlonnx
