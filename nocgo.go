//go:build !cgo

package dlpack

import "unsafe"

// Without cgo the package offers its types, parsing and validation; every
// operation that allocates C memory or calls a C deleter returns
// ErrCgoRequired.

const (
	cgoEnabled  = false
	magicGo     = 0x6f672d646c70616b
	magicBuffer = 0x6275662d646c706b
	magicDead   = 0x646561642d646c70
	bufferAlign = 256
)

var (
	deleterGoVersioned, deleterGoLegacy         uintptr
	deleterBufferVersioned, deleterBufferLegacy uintptr
	emptyData                                   uintptr
	bufferExports, badReleases, liveBlocks      = new(int64), new(int64), new(int64)
	keptBlocks                                  = new(int64)
)

func callDeleter(fn, self uintptr)              {}
func callDeleters(fns, selfs []uintptr)         {}
func cMalloc(n uintptr) unsafe.Pointer          { return nil }
func cFree(p unsafe.Pointer)                    {}
func cKeptAlloc(n uintptr) unsafe.Pointer       { return nil }
func cKeptFree(p unsafe.Pointer)                {}
func cBufferAlloc(nbytes uint64) unsafe.Pointer { return nil }

var publishedAPI *ExchangeAPI

func callAllocator(fn uintptr, dt DataType, dev Device, shape []int64) (uintptr, int, string) {
	return 0, -1, ErrCgoRequired.Error()
}
func callStream(fn uintptr, dev Device) (uintptr, int) { return 0, -1 }
