// Package nilcheck tells a nil pointer held in an interface (a "typed
// nil", such as a nil *dlpack.Array passed as a dlpack.Producer) from a
// usable value, so that the library's entry points refuse it with an
// error instead of panicking in a method that dereferences it: inside a
// c-shared library, a panic kills the host process.
package nilcheck

import (
	"reflect"
	"unsafe"
)

// IsNil reports whether v is nil or holds a nil pointer. Other nil-able
// kinds (maps, channels, functions) are values whose methods may work,
// and are not reported.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	// An interface holding a non-nil pointer has a non-nil data word:
	// the common case costs one load, without reflect.
	if (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] != nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
