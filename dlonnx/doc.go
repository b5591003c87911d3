// Package dlonnx runs ONNX Runtime (through github.com/yalue/onnxruntime_go
// and ONNX Runtime's C API) on DLPack tensors without copying them, in and
// out.
//
//	X to a tensor, no copy:        FromValue (an ORT-allocated output adopted; Session.Run)
//	a tensor to X, shares memory:  ToValue(p), NewOutput(dt, shape)
//	copies (named as such):        CopyToValue(p)
//
// First, load ONNX Runtime: the package does not. Call
// ort.SetSharedLibraryPath and ort.InitializeEnvironment before anything
// else, as onnxruntime_go requires (before that, NewSession and ToValue fail
// with ErrNotLoaded); "The library" below says where the library comes from.
//
// Into ONNX Runtime: ToValue makes an ONNX Runtime tensor over the memory
// of any DLPack producer (an imported dlpack.Foreign, a dlpack.Array or
// Buffer, another Tensor or Output) when it is a compact, writable CPU
// tensor of a type ONNX Runtime has: int8 to int64, uint8 to uint64,
// float16, bfloat16 (minifloat.Float16, minifloat.BFloat16), float32,
// float64, bool, float8_e4m3fn and float8_e5m2 (minifloat.E4M3FN,
// minifloat.E5M2). CopyToValue is the explicit copy for every other layout
// (strided, broadcast, negative strides) and for read-only tensors. A
// *Tensor is an onnxruntime_go Value (pass it to an onnxruntime_go
// session's Run) and an input of a Session.
//
// Out of ONNX Runtime, two ways, both without a copy:
//
//   - Session.Run leaves every output to ONNX Runtime, which allocates it
//     from its session arena in whatever shape the data gives (NonZero,
//     Compress, TopK with a runtime k, Reshape to a runtime shape, a
//     dynamic batch), and hands each back as an Output: a dlpack.Source and
//     dlpack.Producer over ONNX Runtime's own memory, any element type
//     (float16, bfloat16, and the four float8 types included), its shape read from the
//     value. FromValue does the same for an OrtValue* from the caller's
//     own C code. Nothing is zeroed or copied, and the arena makes a loop
//     of runs with varying shapes allocate nothing once warm.
//   - Session.RunInto (or an onnxruntime_go session's Run) writes into
//     outputs the caller made: NewOutput (a zeroed, 256-byte aligned C
//     buffer), sized with Session.OutputShapes where the model's shape
//     information fixes the shapes from the inputs; Tensor.Reshape reuses
//     one within its capacity, and a Pool keeps buffers by element type
//     and size class so that no buffer is allocated or zeroed after
//     warm-up.
//
// Every Tensor and Output is a dlpack.Source and dlpack.Producer, so the
// result goes on to Go (dlpack.From), C (dlpack.Produce) or Python
// (pycapsule) without a copy, or into the next run (ToValue).
//
// Session.CheckInputs, which Run and RunInto call first, checks the inputs
// against the model before ONNX Runtime runs: number, element type, rank,
// static dimensions, and named dimensions equal across the inputs; its
// errors are *InputError, wrapping ErrInput and dlpack.ErrDataType,
// dlpack.ErrNDim or dlpack.ErrShape, and name the input and dimension.
//
// # Which route for ONNX Runtime's outputs, and why
//
// onnxruntime_go copies every output it lets ONNX Runtime allocate into
// Go memory, releases ONNX Runtime's value at once and keeps no handle a
// caller could adopt (v1.27.0 also fails for 2-byte custom types such as
// float16, copying one byte per element); its sessions and values keep
// their C pointers unexported. So a Session here calls ONNX Runtime's C
// API itself, for the few entries it needs (creating the environment
// reference, the session, tensors over given memory, Run, and reading a
// value's type, shape and data). They are declared in this package from
// the documented ABI, by their index in the OrtApi table (which only
// grows at its end), not from onnxruntime_c_api.h, and reached through
// the library onnxruntime_go loaded: the loaded object that exports
// OrtGetApiBase (found with dl_iterate_phdr; several different ones are
// refused with ErrNotLoaded), opened again with RTLD_NOLOAD, which takes
// a reference without loading anything. ONNX Runtime's environment is one
// per process and counted, so a Session's own CreateEnv shares
// onnxruntime_go's and keeps it alive.
//
// # Lifetimes
//
// A Tensor holds its own reference to the memory it shares (taken with
// dlpack.FromRequest), so the producer's Foreign may be closed at any
// time. The Tensor's ONNX Runtime values go with its Go owner (Destroy,
// or the cleanup of a Tensor nobody destroyed); its DLPack consumers hold
// the memory, not the values: the last of owner and consumers unpins Go
// memory and drops the memory reference (for a Foreign, that runs its
// producer's deleter once; for a Pool's Tensor, it gives the buffer
// back).
//
// An Output's memory belongs to ONNX Runtime's value, so its Go owner
// (Destroy, or a cleanup) and each consumer hold a share of the value,
// and the last of them releases it, exactly once.
//
// Every ONNX Runtime value, Output and Session made here holds a
// reference to the library, so releases may come in any order: Destroy,
// Session.Destroy, ort.DestroyEnvironment (which closes onnxruntime_go's
// handle on the library) and consumer releases, from any goroutine or C
// thread, never call into an unloaded library; when the last is gone the
// package closes its handle. Destroy a Tensor or Output only after the
// runs that use it have returned, as for every onnxruntime_go value;
// destroy onnxruntime_go's own sessions before ort.DestroyEnvironment, as
// onnxruntime_go requires.
//
// # The cgo pointer rules
//
// ONNX Runtime keeps the data pointer of a tensor made over caller memory
// (CreateTensorWithDataAsOrtValue) after the call that made it returns, and
// reads it in every Run. Memory outside the Go heap (C memory, mmap:
// tensors from NumPy, PyTorch, a dlpack.Buffer, NewOutput, CopyToValue, a
// Pool, an Output) needs nothing more. Go heap memory (a dlpack.Array, a
// Go export coming back) is pinned with a runtime.Pinner from ToValue
// until the last release above, so C holds a Go pointer only while it is
// pinned, as the cgo rules require; the suite runs under
// GOEXPERIMENT=cgocheck2.
//
// # What ONNX Runtime does with the memory
//
// ONNX Runtime treats inputs as const: kernels read them and the memory
// planner never reuses a buffer the caller provided; it writes an output's
// buffer during Run, every element of it (so neither Reshape nor a Pool
// zeroes anything). An ONNX Runtime tensor is nonetheless a writable
// object (GetTensorMutableData, onnxruntime_go's ZeroContents, binding as
// an output), so ToValue shares only writable memory and refuses
// read-only tensors with dlpack.ErrReadOnly; CopyToValue copies them.
//
// # Details
//
// A Tensor's GetData is its memory as bytes; an empty tensor gets one
// byte of the bridge's own, because onnxruntime_go wants one. 0-d tensors
// are refused as inputs (dlpack.ErrShape): onnxruntime_go makes none over
// given memory; an Output may be 0-d. The packed sub-byte types (int4,
// uint4, float4, int2) and strings have no DLPack type here and are
// refused with dlpack.ErrDataType. onnxruntime_go v1.27.0 never frees the
// C copy of a model path (NewDynamicAdvancedSession); open models from
// their bytes (NewDynamicAdvancedSessionWithONNXData, NewSession) where
// sessions come and go.
//
// # The library
//
// The onnxruntime wheel on PyPI ships the library (onnxruntime/capi/libonnxruntime.so.*);
// onnxruntime_go v1.27.0 and this package use C API version 24, which ONNX
// Runtime 1.24 and later provide. The library is found with
// dl_iterate_phdr on Linux and other ELF systems (tested) and with dyld's
// image list on macOS (not tested); Windows is not supported by this
// route. Without cgo
// (CGO_ENABLED=0) onnxruntime_go does not build; this package then offers
// the same functions without the onnxruntime_go Value methods, and they
// return dlpack.ErrCgoRequired.
package dlonnx
