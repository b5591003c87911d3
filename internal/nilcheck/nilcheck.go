// Package nilcheck tells a nil pointer held in an interface (a "typed
// nil", such as a nil *dlpack.Array passed as a dlpack.Producer) from a
// usable value, so that the library's entry points refuse it with an
// error instead of panicking in a method that dereferences it: inside a
// c-shared library, a panic kills the host process.
package nilcheck

import "reflect"

// IsNil reports whether v is nil or holds a nil pointer. Other nil-able
// kinds (maps, channels, functions) are values whose methods may work,
// and are not reported.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v) // inlined: a few loads, no allocation
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
