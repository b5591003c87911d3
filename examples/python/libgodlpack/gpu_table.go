package main

/*
#include <stdint.h>

typedef int (*godlpack_from_py_fn)(void* py_object, void** out);

// godlpack_call_from_py calls a table's managed_tensor_from_py_object_no_sync.
static int godlpack_call_from_py(uintptr_t fn, uintptr_t obj, void** out) {
	*out = 0;
	return ((godlpack_from_py_fn)fn)((void*)obj, out);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// tableOf returns the 1.x (x >= 3) exchange table along p's prev_api chain,
// as dlpack.OpenExchangeAPI finds it (which validated the chain first).
func tableOf(p unsafe.Pointer) (*dlpack.ExchangeAPI, error) {
	if _, err := dlpack.OpenExchangeAPI(p); err != nil {
		return nil, err
	}
	for p != nil {
		h := (*dlpack.ExchangeAPIHeader)(p)
		if h.Version.Major == dlpack.MajorVersion && h.Version.Minor >= 3 {
			return (*dlpack.ExchangeAPI)(p), nil
		}
		p = *(*unsafe.Pointer)(unsafe.Pointer(&h.PrevAPI))
	}
	return nil, fmt.Errorf("%w: no 1.3 table", dlpack.ErrExchangeAPI)
}

// fromTable takes obj's tensor through api's
// managed_tensor_from_py_object_no_sync (GIL held). When the entry fails
// the error wraps pycapsule.ErrPython (the table's exception is pending),
// and a tensor it returned anyway has been released.
func fromTable(api *dlpack.ExchangeAPI, obj uintptr) (dlpack.Managed, error) {
	if api.ManagedTensorFromPyObjectNoSync == 0 {
		return dlpack.Managed{}, fmt.Errorf("%w: managed_tensor_from_py_object_no_sync is NULL", dlpack.ErrExchangeAPI)
	}
	var out unsafe.Pointer
	rc := int(C.godlpack_call_from_py(C.uintptr_t(api.ManagedTensorFromPyObjectNoSync), C.uintptr_t(obj), &out))
	m := dlpack.Managed{Versioned: (*dlpack.ManagedTensorVersioned)(out)}
	switch {
	case rc != 0:
		m.Close()
		// The entry set a Python exception (pycapsule.Raise keeps it), or
		// broke the rule and set none (then Raise sets a BufferError).
		return dlpack.Managed{}, fmt.Errorf("%w: %w: managed_tensor_from_py_object_no_sync returned %d", pycapsule.ErrPython, dlpack.ErrExchangeAPI, rc)
	case out == nil:
		return dlpack.Managed{}, fmt.Errorf("%w: managed_tensor_from_py_object_no_sync returned no tensor", dlpack.ErrExchangeAPI)
	}
	return m, nil
}
