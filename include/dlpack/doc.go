// Package dlpackh carries include/dlpack/dlpack.h, the DLPack 1.3 C header
// of package github.com/godlpack/dlpack, wherever the module goes.
//
// `go mod vendor` copies only directories that hold a Go package some
// package imports; package dlpack imports this one (for no other effect),
// so a vendored copy of the module keeps the header and still builds with
// -mod=vendor. Header returns the text, for tools that write it into
// another package (cmd/dlpack-header).
package dlpackh

import _ "embed"

//go:embed dlpack.h
var header []byte

// Header returns a copy of dlpack.h, byte for byte.
func Header() []byte { return append([]byte(nil), header...) }
