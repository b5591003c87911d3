package tensorfile

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/fault"
)

// Files cut short while mapped.
//
// Pages of a shared mapping that lie past the file's current end fault
// when read (SIGBUS): if another process truncates a mapped file, a plain
// read of the lost part kills a Go program ("fatal error: fault"). Every
// read of mapped memory this package does itself (the writers streaming a
// mapped tensor, Tensor.CopyTo) runs with the fault turned into a panic
// (runtime/debug.SetPanicOnFault) that is recovered into an error wrapping
// ErrTruncated; a fault at any other address panics on. Reads of a file
// through its descriptor (ReadNPY, the copied members of OpenNPZ and their
// CRC checks) cannot fault: a truncation there is a short read, the same
// ErrTruncated.

// live lists the mappings not yet unmapped, so that the writers can tell
// a tensor in a mapping (read through a bounce buffer, guarded) from one
// in ordinary memory (written straight from its memory).
var live struct {
	sync.Mutex
	m map[*mapping]struct{}
}

func (m *mapping) register() {
	live.Lock()
	defer live.Unlock()
	if live.m == nil {
		live.m = make(map[*mapping]struct{})
	}
	live.m[m] = struct{}{}
}

func (m *mapping) unregister() {
	live.Lock()
	defer live.Unlock()
	delete(live.m, m)
}

// mappedAt returns the range of the live mapping holding [p, p+n), if any.
func mappedAt(p, n uintptr) (base, size uintptr, ok bool) {
	live.Lock()
	defer live.Unlock()
	for m := range live.m {
		b := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
		if p >= b && p-b < uintptr(len(m.data)) && n <= uintptr(len(m.data))-(p-b) {
			return b, uintptr(len(m.data)), true
		}
	}
	return 0, 0, false
}

// guardMapped runs fn, turning a fault inside [base, base+size) into an
// error wrapping ErrTruncated for field.
func guardMapped(field string, base, size uintptr, fn func() error) error {
	err := fault.Guard(base, size, fn)
	if fe, ok := err.(*fault.Error); ok {
		return fieldErr(ErrTruncated, field, fmt.Sprintf("byte %d of the mapping", fe.Offset), "the file was cut short while mapped (another process truncated or rewrote it); the lost pages cannot be read")
	}
	return err
}

// CopyTo copies the tensor's data bytes (NBytes of them, in the file's
// layout: row-major, or column-major for Fortran-order arrays) into dst
// and returns how many it copied, min(len(dst), NBytes). It is the safe
// way to read a mapped tensor that another process may truncate: a read of
// a page the truncation took fails with an error wrapping ErrTruncated
// instead of killing the process, as a direct read through a view
// (dlpack.ReadOnlySlice of a Foreign of the tensor) would. It fails with
// dlpack.ErrClosed after the File's Close.
func (t *Tensor) CopyTo(dst []byte) (int, error) {
	f := t.file
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, fieldErr(dlpack.ErrClosed, "tensor", t.name, "its file is closed")
	}
	n := int(min(int64(len(dst)), t.nbytes))
	if n == 0 {
		return 0, nil
	}
	if t.buf != nil {
		return copy(dst, t.buf.Data()), nil
	}
	src := unsafe.Slice((*byte)(t.data), n)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data)))
	err := guardMapped("tensor "+fmt.Sprintf("%q", t.name), base, uintptr(len(f.m.data)), func() error {
		copy(dst[:n], src)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
