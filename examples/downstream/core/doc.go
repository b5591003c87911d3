// Package downstream is a separate Go module that embeds
// github.com/godlpack/dlpack the way another cgo project would, and is
// built and tested by the library's test command both normally and
// vendored (`go mod vendor`, then -mod=vendor):
//
//   - cprod: C code that includes the library's header through a copy
//     written by `go generate` (`go tool dlpack-header -o .`); it produces
//     tensors that Go imports and consumes tensors that Go exports.
//   - theirs: C code with its own copy of a dlpack.h (upstream's include
//     guard, DLPack 1.1), as a project that already ships one from PyTorch
//     or TVM has; its tensors cross into cprod and into the library, and
//     back, through unsafe.Pointer.
//   - mixed: one C file that includes both headers, in each order.
//   - viaflags (build tag dlpack_cflags): C code that includes
//     <dlpack/dlpack.h> from the library's module directory, found with
//     CGO_CFLAGS="-I$(go list -f '{{.Dir}}' github.com/godlpack/dlpack)/include".
//
// Run it from the repository root with `make downstream` (or `bash
// examples/downstream/check.sh core`), which builds and tests it both ways.
package downstream
