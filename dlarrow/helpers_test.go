package dlarrow_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
)

// produce hands arr to a consumer through the protocol, the one way out of
// Arrow: FromArray, then the Tensor's DLPack; the managed tensor holds its
// own reference to arr until its deleter runs.
func produce(arr arrow.Array, req dlpack.Request) (dlpack.Managed, error) {
	t, err := dlarrow.FromArray(arr)
	if err != nil {
		return dlpack.Managed{}, err
	}
	defer t.Close()
	return dlpack.Produce(t, req)
}

// checked returns an allocator that fails the test unless every byte it
// handed out is back when the test ends.
func checked(t *testing.T) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// fromJSON builds an array of type dt from a JSON list.
func fromJSON(t *testing.T, mem memory.Allocator, dt arrow.DataType, js string) arrow.Array {
	t.Helper()
	arr, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
	if err != nil {
		t.Fatalf("FromJSON(%s, %s): %v", dt, js, err)
	}
	return arr
}

// valuesAddr is the address of element i of arr's values buffer, counting
// from the array's offset.
func valuesAddr(arr arrow.Array, i, size int) uintptr {
	b := arr.Data().Buffers()[1].Bytes()
	return uintptr(unsafe.Pointer(&b[0])) + uintptr((arr.Data().Offset()+i)*size)
}
