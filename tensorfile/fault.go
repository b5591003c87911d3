package tensorfile

import (
	"fmt"
	"os"
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
// mapped tensor, Tensor.CopyTo, the CRC-32 check of a mapped .npz member)
// runs with the fault turned into a panic
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

// mappedAt returns the live mapping holding [p, p+n), if any.
func mappedAt(p, n uintptr) (*mapping, bool) {
	live.Lock()
	defer live.Unlock()
	for m := range live.m {
		b := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
		if p >= b && p-b < uintptr(len(m.data)) && n <= uintptr(len(m.data))-(p-b) {
			return m, true
		}
	}
	return nil, false
}

// guardMapped runs fn, which reads the n bytes at p in the mapping m,
// turning a fault inside the mapping into an error wrapping ErrTruncated
// that names the file's size now (and the bytes read and the size mapped,
// which the file no longer has).
func guardMapped(field string, m *mapping, p, n uintptr, fn func() error) error {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
	err := fault.Guard(base, uintptr(len(m.data)), fn)
	if _, ok := err.(*fault.Error); !ok {
		return err
	}
	lo := p - base
	now := "of unknown size"
	if st, err := os.Stat(m.path); err == nil {
		now = fmt.Sprintf("%d bytes", st.Size())
	}
	return fieldErr(ErrTruncated, field, fmt.Sprintf("bytes %d..%d of %s", lo, lo+n, m.path),
		fmt.Sprintf("the file was cut short while mapped: it is now %s, was %d when mapped (another process truncated or rewrote it); the lost pages cannot be read", now, len(m.data)))
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
	if err := t.checkCRC(); err != nil {
		return 0, err
	}
	n := int(min(int64(len(dst)), t.nbytes))
	if n == 0 {
		return 0, nil
	}
	if buf := t.buf(); buf != nil {
		return copy(dst, buf.Data()), nil
	}
	src := unsafe.Slice((*byte)(t.data()), n)
	err := guardMapped("tensor "+fmt.Sprintf("%q", t.name), f.m, uintptr(t.data()), uintptr(n), func() error {
		copy(dst[:n], src)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
