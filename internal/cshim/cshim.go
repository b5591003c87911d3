// Package cshim holds C producers and consumers of DLPack tensors for the
// tests of package dlpack (test files cannot use cgo themselves). Nothing
// outside the tests links it.
package cshim

/*
#cgo CFLAGS: -I${SRCDIR}/../../include -O1
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "cshim.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// Spec describes a tensor for Make. Zero values give a versioned 1.3 CPU
// tensor; set fields to produce anything, including malformed tensors.
type Spec struct {
	Legacy       bool
	Major, Minor uint32
	Flags        uint64
	NullDeleter  bool
	DeviceType   int32
	DeviceID     int32
	NDim         int32
	Code, Bits   uint8
	Lanes        uint16
	Shape        []int64 // copied into the struct; NDim entries are read
	ShapeNull    bool    // set the shape pointer to NULL
	Strides      []int64 // nil: NULL strides
	ByteOffset   uint64
	Data         []byte  // copied into a 64-byte aligned C buffer (plus 256 spare bytes)
	DataShift    int     // place Data this many bytes into the buffer
	AllocData    bool    // allocate the buffer even when Data is empty
	DataAddr     uintptr // used verbatim as data when Data is empty and AllocData false
}

var nextSlot atomic.Int64

// Tensor is a producer-made tensor and the slot counting its deleter calls.
type Tensor struct {
	Ptr  unsafe.Pointer
	Slot int
}

// Deletes returns how many times the tensor's deleter ran.
func (t Tensor) Deletes() int64 {
	return atomic.LoadInt64((*int64)(unsafe.Pointer(&C.cshim_deletes[t.Slot])))
}

// Live returns how many tensors made by Make are not yet freed (by their
// deleter or by Free).
func Live() int64 { return atomic.LoadInt64((*int64)(unsafe.Pointer(&C.cshim_live))) }

// Make produces a tensor in C memory as described by s.
func Make(s Spec) Tensor {
	slot := int(nextSlot.Add(1) % C.CSHIM_SLOTS)
	atomic.StoreInt64((*int64)(unsafe.Pointer(&C.cshim_deletes[slot])), 0)
	cs := C.cshim_spec{
		slot: C.int(slot), major: C.uint32_t(s.Major), minor: C.uint32_t(s.Minor),
		flags: C.uint64_t(s.Flags), device_type: C.int32_t(s.DeviceType), device_id: C.int32_t(s.DeviceID),
		ndim: C.int32_t(s.NDim), code: C.uint8_t(s.Code), bits: C.uint8_t(s.Bits), lanes: C.uint16_t(s.Lanes),
		byte_offset: C.uint64_t(s.ByteOffset), data_len: C.size_t(len(s.Data)), data_shift: C.size_t(s.DataShift),
		data_addr: C.uintptr_t(s.DataAddr),
	}
	if s.Legacy {
		cs.legacy = 1
	}
	if s.NullDeleter {
		cs.null_deleter = 1
	}
	if s.ShapeNull {
		cs.shape_null = 1
	}
	if s.AllocData {
		cs.alloc_data = 1
	}
	var free []unsafe.Pointer
	if len(s.Shape) > 0 {
		p := C.CBytes(int64Bytes(s.Shape))
		free = append(free, p)
		cs.shape, cs.nshape = (*C.int64_t)(p), C.int(len(s.Shape))
	}
	if s.Strides != nil {
		cs.strides_given = 1
		if len(s.Strides) > 0 {
			p := C.CBytes(int64Bytes(s.Strides))
			free = append(free, p)
			cs.strides = (*C.int64_t)(p)
		}
		if int(cs.nshape) < len(s.Strides) {
			// Strides longer than the shape: pad the shape with zeros.
			sh := make([]int64, len(s.Strides))
			copy(sh, s.Shape)
			p := C.CBytes(int64Bytes(sh))
			free = append(free, p)
			cs.shape, cs.nshape = (*C.int64_t)(p), C.int(len(sh))
		}
	}
	if len(s.Data) > 0 {
		p := C.CBytes(s.Data)
		free = append(free, p)
		cs.data = p
	}
	ptr := C.cshim_make(&cs)
	for _, p := range free {
		C.free(p)
	}
	return Tensor{Ptr: ptr, Slot: slot}
}

func int64Bytes(v []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}

// Free frees a tensor made with NullDeleter (its deleter cannot).
func Free(t Tensor) { C.cshim_free_unmanaged(t.Ptr) }

// SumVersioned sums a float32 or float64 DLManagedTensorVersioned in C,
// honouring strides and byte_offset.
func SumVersioned(p unsafe.Pointer) float64 {
	m := (*C.DLManagedTensorVersioned)(p)
	return float64(C.cshim_sum(&m.dl_tensor))
}

// SumLegacy is SumVersioned for a DLManagedTensor.
func SumLegacy(p unsafe.Pointer) float64 {
	m := (*C.DLManagedTensor)(p)
	return float64(C.cshim_sum(&m.dl_tensor))
}

// ReleaseVersioned calls the deleter of a DLManagedTensorVersioned from C.
func ReleaseVersioned(p unsafe.Pointer) { C.cshim_call_versioned((*C.DLManagedTensorVersioned)(p)) }

// ReleaseLegacy calls the deleter of a DLManagedTensor from C.
func ReleaseLegacy(p unsafe.Pointer) { C.cshim_call_legacy((*C.DLManagedTensor)(p)) }

// ReleaseOnThreads calls the deleters of all tensors from nthreads pthreads
// created in C (each exits right after its share).
func ReleaseOnThreads(ptrs []unsafe.Pointer, nthreads int, legacy bool) {
	if len(ptrs) == 0 {
		return
	}
	arr := (*[1 << 28]unsafe.Pointer)(C.calloc(C.size_t(len(ptrs)), C.size_t(unsafe.Sizeof(uintptr(0)))))[:len(ptrs):len(ptrs)] // zeroed: see CPointers
	copy(arr, ptrs)
	l := C.int(0)
	if legacy {
		l = 1
	}
	if C.cshim_release_on_threads((*unsafe.Pointer)(unsafe.Pointer(&arr[0])), C.int(len(ptrs)), C.int(nthreads), l) != 0 {
		panic("cshim: pthread_create failed")
	}
	C.free(unsafe.Pointer(&arr[0]))
}

// Field is one entry of the C layout table.
type Field struct {
	Name         string
	Offset, Size uintptr
}

// Layout returns the C compiler's size of every struct and offset and size
// of every field of include/dlpack/dlpack.h.
func Layout() []Field {
	var buf [64]C.cshim_field
	n := int(C.cshim_layout(&buf[0], 64))
	out := make([]Field, 0, n)
	for _, f := range buf[:n] {
		out = append(out, Field{C.GoString(f.name), uintptr(f.offset), uintptr(f.size)})
	}
	return out
}

// FakeBlock returns n zeroed bytes of C memory (never freed by a deleter).
func FakeBlock(n int) unsafe.Pointer { return C.cshim_fake_block(C.size_t(n)) }

// PoisonFree leaves a freed chunk of n bytes filled with 0xdeaddeaddeaddead
// where this thread's next malloc of n bytes will find it.
func PoisonFree(n int) { C.cshim_poison_free(C.size_t(n)) }

// FreeBlock frees memory from FakeBlock.
func FreeBlock(p unsafe.Pointer) { C.free(p) }

// BenchMake returns a fresh 32x32 float32 versioned tensor whose deleter
// frees it (for benchmarks).
func BenchMake() unsafe.Pointer { return unsafe.Pointer(C.cshim_bench_make()) }

// BenchConsume reads shape[0] of a versioned tensor and calls its deleter.
func BenchConsume(p unsafe.Pointer) int64 {
	return int64(C.cshim_bench_consume((*C.DLManagedTensorVersioned)(p)))
}

// BenchMakeBatch has the benchmark producer make n tensors into the C
// array ptrs (from CPointers) in one call.
func BenchMakeBatch(ptrs *unsafe.Pointer, n int) { C.cshim_bench_make_batch(ptrs, C.int(n)) }

// BenchCFloor runs n produce -> consume -> release cycles in C alone.
func BenchCFloor(n int) int64 { return int64(C.cshim_bench_c_floor(C.int64_t(n))) }

// StressStart starts nproducers C pthreads that each make perProducer
// float32 tensors [1 2 3 4] for Go (StressTake), and nconsumers C pthreads
// that read and release what Go hands them (StressGive). Threads are
// created in C, never by Go, and exit when their work is done.
func StressStart(nproducers, perProducer, nconsumers int) {
	if C.cshim_stress_start(C.int(nproducers), C.int(perProducer), C.int(nconsumers)) != 0 {
		panic("cshim: pthread_create failed")
	}
}

// StressTake returns the next C-made tensor, or nil if none is queued now.
func StressTake() unsafe.Pointer { return C.cshim_stress_take() }

// StressProducing reports whether producer threads are still running.
func StressProducing() bool { return C.cshim_stress_producers_left() > 0 }

// StressGive queues a versioned tensor for the consumer threads; false if
// the queue is full.
func StressGive(p unsafe.Pointer) bool { return C.cshim_stress_give(p) != 0 }

// StressResult is what the C side counted.
type StressResult struct{ Made, Deleted, Released, BadSums int64 }

// StressFinish tells the consumers that no more exports come, joins every
// thread and returns the counts.
func StressFinish() StressResult {
	var r [4]C.int64_t
	C.cshim_stress_finish(&r[0], &r[1], &r[2], &r[3])
	return StressResult{int64(r[0]), int64(r[1]), int64(r[2]), int64(r[3])}
}

// StressDeleted returns how many C-made stress tensors have been deleted
// so far (deleters may still run from cleanups after StressFinish).
func StressDeleted() int64 { return int64(C.cshim_stress_deleted()) }

// ExerciseTable uses an exchange table from C the way a C library would
// (allocate, write, read, release; error reports; streams) and returns ""
// or what failed.
func ExerciseTable(api unsafe.Pointer) string {
	var report [256]C.char
	if C.cshim_exercise_table((*C.DLPackExchangeAPI)(api), &report[0], 256) != 0 {
		return C.GoString(&report[0])
	}
	return ""
}

// ForeignAPI returns a foreign library's exchange table: 0, a v2.0 head
// whose prev_api is a usable v1.3 table; 1, a lone v2.0 table; 2, a
// header whose prev_api points to itself.
func ForeignAPI(which int) unsafe.Pointer { return C.cshim_foreign_api(C.int(which)) }

// ForeignDeletes counts deleter calls on tensors from the foreign table.
func ForeignDeletes() int64 {
	return atomic.LoadInt64((*int64)(unsafe.Pointer(&C.cshim_foreign_deletes)))
}

// BenchMakeLegacy returns a fresh 32x32 float32 legacy tensor (NULL
// strides) whose deleter frees it.
func BenchMakeLegacy() unsafe.Pointer { return unsafe.Pointer(C.cshim_bench_make_legacy()) }

// BenchMakeOver returns a 1-d uint8 tensor of n bytes over data, which the
// caller keeps alive; the deleter frees only the header.
func BenchMakeOver(data unsafe.Pointer, n int64) unsafe.Pointer {
	return unsafe.Pointer(C.cshim_bench_make_over(data, C.int64_t(n)))
}

// ReleaseOnWarmThread releases the versioned tensors on one persistent
// C-created thread and waits. ptrs must be C memory (see CPointers).
func ReleaseOnWarmThread(ptrs *unsafe.Pointer, n int) {
	C.cshim_release_on_warm_thread(ptrs, C.int(n))
}

// CPointers returns C memory for n pointers, and a Go slice over it.
func CPointers(n int) (*unsafe.Pointer, []unsafe.Pointer) {
	// Zeroed: Go stores into this array run the GC's write barrier, which
	// inspects the old values, and malloc garbage can look like a bad
	// pointer to it.
	p := (*unsafe.Pointer)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	return p, unsafe.Slice(p, n)
}

// FreeCPointers frees memory from CPointers.
func FreeCPointers(p *unsafe.Pointer) { C.free(unsafe.Pointer(p)) }
