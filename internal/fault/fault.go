// Package fault turns the memory fault of a read from a mapped file that
// another process has cut short into an error, for the packages that read
// mapped memory themselves (tensorfile, dlarrow).
//
// A read from a page of a shared file mapping that lies past the file's
// current end raises SIGBUS, which kills a Go program ("fatal error:
// fault") unless the goroutine has called runtime/debug.SetPanicOnFault,
// in which case it panics with a runtime.Error whose Addr method gives the
// faulting address. Guard sets that for the duration of one function,
// recovers such a panic when the address lies in the mapping it was given,
// and returns an *Error; any other panic (a fault elsewhere, a bug) goes
// on as it was.
package fault

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Error is a fault at Addr, Offset bytes into the guarded range.
type Error struct {
	Addr   uintptr
	Offset uintptr
}

func (e *Error) Error() string {
	return fmt.Sprintf("memory fault at %#x, byte %d of the mapping (the file was cut short while mapped)", e.Addr, e.Offset)
}

// addrError is what a fault panic carries with SetPanicOnFault.
type addrError interface {
	runtime.Error
	Addr() uintptr
}

// Guard runs fn on the calling goroutine with faults turned into panics,
// and returns fn's error, or an *Error when fn faulted at an address
// inside [base, base+size). A fault panic that fn's callee recovered and
// returned as a wrapped error is recognised too (arrow-go's readers
// recover panics into errors). fn must not start goroutines that read the
// range: the setting is per goroutine.
func Guard(base, size uintptr, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				if fe := inRange(e, base, size); fe != nil {
					err = fe
					return
				}
			}
			panic(r)
		}
	}()
	err = fn()
	if err != nil {
		if fe := inRange(err, base, size); fe != nil {
			return fe
		}
	}
	return err
}

func inRange(err error, base, size uintptr) *Error {
	var ae addrError
	if !errors.As(err, &ae) {
		return nil
	}
	a := ae.Addr()
	if a < base || a-base >= size {
		return nil
	}
	return &Error{Addr: a, Offset: a - base}
}
