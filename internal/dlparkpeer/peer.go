//go:build cgo && dlpark

// Package dlparkpeer calls the Rust dlpark crate (through the C-ABI
// library in rust/, built by cargo) to produce and consume DLPack tensors
// in the Go tests. It is built only with the dlpark tag, after
// `cargo build --release --manifest-path internal/dlparkpeer/rust/Cargo.toml`
// (make test does both).
package dlparkpeer

/*
#cgo LDFLAGS: -L${SRCDIR}/rust/target/release -ldlpark_peer -lm -ldl -lpthread
#include <stdint.h>
#include <stdlib.h>
void* dlpark_make_versioned(int64_t rows, int64_t cols);
void* dlpark_make_legacy(int64_t rows, int64_t cols);
int64_t dlpark_live(void);
double dlpark_consume_sum(void* m);
void* dlpark_make_bytes(uint8_t code, uint8_t bits, int64_t n, const void* data);
int64_t dlpark_copy_bytes(void* m, void* out, size_t cap);
*/
import "C"

import (
	"unsafe"

	"github.com/godlpack/dlpack"
)

// MakeVersioned returns a rows x cols float32 DLManagedTensorVersioned
// holding 0, 1, 2, ..., made by dlpark.
func MakeVersioned(rows, cols int64) unsafe.Pointer {
	return C.dlpark_make_versioned(C.int64_t(rows), C.int64_t(cols))
}

// MakeLegacy is MakeVersioned for a legacy DLManagedTensor.
func MakeLegacy(rows, cols int64) unsafe.Pointer {
	return C.dlpark_make_legacy(C.int64_t(rows), C.int64_t(cols))
}

// Live returns how many dlpark-made tensors have not been released.
func Live() int64 { return int64(C.dlpark_live()) }

// ConsumeSum hands a versioned float32/float64 tensor to dlpark, which
// validates it, sums it (any strides) and drops it, calling its deleter.
// NaN means dlpark rejected it.
func ConsumeSum(m unsafe.Pointer) float64 { return float64(C.dlpark_consume_sum(m)) }

// MakeBytes returns a 1-d versioned tensor of n elements of type dt made
// by dlpark over a copy of data.
func MakeBytes(dt dlpack.DataType, n int64, data []byte) unsafe.Pointer {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = C.CBytes(data)
		defer C.free(p)
	}
	return C.dlpark_make_bytes(C.uint8_t(dt.Code), C.uint8_t(dt.Bits), C.int64_t(n), p)
}

// CopyBytes hands a compact versioned tensor to dlpark, which copies its
// bytes out (through its own cpu_bytes) and drops it; nil if dlpark
// rejects it.
func CopyBytes(m unsafe.Pointer, capBytes int) []byte {
	out := C.malloc(C.size_t(capBytes + 1))
	defer C.free(out)
	n := C.dlpark_copy_bytes(m, out, C.size_t(capBytes))
	if n < 0 {
		return nil
	}
	return C.GoBytes(out, C.int(n))
}
