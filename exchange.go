package dlpack

import (
	"strconv"
	"unsafe"
)

// PublishedExchangeAPI returns this package's DLPack 1.3 exchange table,
// for handing to C or C++ code that allocates tensors through it. The
// table lives in C memory for the whole process and must not be written.
//
//   - managed_tensor_allocator makes a compact row-major CPU tensor of the
//     prototype's dtype and shape (device must be CPU), zeroed, 256-byte
//     aligned, in memory this package allocates outside the Go heap; its
//     deleter is pure C. Failures call SetError with a Python exception
//     kind ("ValueError", "BufferError", "MemoryError") and return -1.
//   - current_work_stream reports NULL for the CPU and fails (-1) for other
//     devices.
//   - The three Python-object entries are NULL: the table serves C and Go
//     callers, not a Python framework.
//
// Tensors it allocates count in Outstanding until their deleter runs.
// Returns nil when built without cgo.
func PublishedExchangeAPI() *ExchangeAPI { return publishedAPI }

// maxAPIChain bounds the walk along prev_api (a cycle must not hang us).
const maxAPIChain = 64

// ExchangeClient calls another library's DLPack exchange table.
type ExchangeClient struct {
	api *ExchangeAPI // C memory, process lifetime by the spec
}

// OpenExchangeAPI reads the exchange table at p (a DLPackExchangeAPI*,
// such as the pointer in a "dlpack_exchange_api" capsule). It walks the
// header's prev_api chain from p and uses the first table whose version is
// 1.x with x >= 3, the first layout this package knows; a table of another
// major version is skipped without reading past its header. It fails with
// ErrExchangeAPI when no usable table is found.
func OpenExchangeAPI(p unsafe.Pointer) (*ExchangeClient, error) {
	if p == nil {
		return nil, fieldErr(ErrNilPointer, "exchange API", "NULL", "")
	}
	var seen []Version
	for i := 0; p != nil && i < maxAPIChain; i++ {
		h := (*ExchangeAPIHeader)(p)
		seen = append(seen, h.Version)
		if h.Version.Major == MajorVersion && h.Version.Minor >= 3 {
			return &ExchangeClient{api: (*ExchangeAPI)(p)}, nil
		}
		p = *(*unsafe.Pointer)(unsafe.Pointer(&h.PrevAPI))
	}
	return nil, fieldErr(ErrExchangeAPI, "header.version", seen, "no table of version 1.3 or a later 1.x along prev_api")
}

// Version returns the version of the table in use.
func (c *ExchangeClient) Version() Version { return c.api.Header.Version }

// API returns the table in use: the 1.x (x >= 3) table OpenExchangeAPI
// found along prev_api, in the library's memory for the process lifetime.
// Its entries are C function pointers for C code to call (package
// pycapsule calls the Python-object entries); it must not be written.
func (c *ExchangeClient) API() *ExchangeAPI { return c.api }

// Allocate asks the library's allocator for a tensor of the given data
// type, shape and device, and imports it (see Import; opts apply). An
// allocator failure returns an error wrapping ErrExchangeAPI with the
// message the library gave through SetError; a malformed result is
// rejected and released like any import.
func (c *ExchangeClient) Allocate(dt DataType, shape []int64, dev Device, opts ...ImportOption) (Foreign, error) {
	if !cgoEnabled {
		return Foreign{}, ErrCgoRequired
	}
	if c.api.ManagedTensorAllocator == 0 {
		return Foreign{}, fieldErr(ErrExchangeAPI, "managed_tensor_allocator", "NULL", "the library offers no allocator")
	}
	if len(shape) > MaxNDim {
		return Foreign{}, fieldErr(ErrNDim, "ndim", len(shape), "must be 0.."+strconv.Itoa(MaxNDim))
	}
	m, rc, msg := callAllocator(c.api.ManagedTensorAllocator, dt, dev, shape)
	if rc != 0 {
		if m != 0 { // a tensor despite the failure: ours to release
			if deleter := (*ManagedTensorVersioned)(*(*unsafe.Pointer)(unsafe.Pointer(&m))).Deleter; deleter != 0 {
				callDeleter(deleter, m)
			}
		}
		return Foreign{}, fieldErr(ErrExchangeAPI, "managed_tensor_allocator", rc, msg)
	}
	if m == 0 {
		return Foreign{}, fieldErr(ErrExchangeAPI, "managed_tensor_allocator", "NULL", "returned 0 without a tensor")
	}
	return Import(*(*unsafe.Pointer)(unsafe.Pointer(&m)), opts...)
}

// CurrentWorkStream returns the stream the library works on for dev (0 for
// devices without streams), or an error wrapping ErrExchangeAPI.
func (c *ExchangeClient) CurrentWorkStream(dev Device) (uintptr, error) {
	if !cgoEnabled {
		return 0, ErrCgoRequired
	}
	if c.api.CurrentWorkStream == 0 {
		return 0, fieldErr(ErrExchangeAPI, "current_work_stream", "NULL", "the library offers no stream query")
	}
	s, rc := callStream(c.api.CurrentWorkStream, dev)
	if rc != 0 {
		return 0, fieldErr(ErrExchangeAPI, "current_work_stream", rc, "failed for "+dev.String())
	}
	return s, nil
}
