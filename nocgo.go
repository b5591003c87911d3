//go:build !cgo

package dlpack

import (
	"runtime/cgo"
	"unsafe"
)

// Without cgo the package offers its types, parsing and validation; every
// operation that allocates C memory or calls a C deleter returns
// ErrCgoRequired.

const (
	cgoEnabled  = false
	magicGo     = 0x6f672d646c70616b
	magicBuffer = 0x6275662d646c706b
	magicDead   = 0xdeaddeaddeaddead
	bufferAlign = 256
)

var (
	deleterGoVersioned, deleterGoLegacy         uintptr
	deleterBufferVersioned, deleterBufferLegacy uintptr
	emptyData                                   uintptr
	bufferExports, badReleases                  = new(int64), new(int64)
	_                                           = releaseExport // used by the cgo build's callback
	_                                           cgo.Handle
)

func callDeleter(fn, self uintptr)              {}
func cMalloc(n uintptr) unsafe.Pointer          { return nil }
func cFree(p unsafe.Pointer)                    {}
func cBufferAlloc(nbytes uint64) unsafe.Pointer { return nil }
