//go:build cgo

// Package pyembed starts a CPython interpreter inside a Go test binary, so
// that package pycapsule, which finds CPython at run time, is tested from
// Go (plain, -race, cgocheck2, asan) against real Python objects and real
// NumPy. The interpreter is the one of the Python executable named by the
// environment variable GODLPACK_PYTHON (a virtualenv's python: its
// libpython and its sys.path are used); without it, Start reports
// ErrNoPython and the tests skip.
package pyembed

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "pyembed.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"unsafe"
)

// EnvPython names the Python executable whose interpreter is embedded.
const EnvPython = "GODLPACK_PYTHON"

// ErrNoPython is what Start returns when EnvPython is not set.
var ErrNoPython = errors.New("pyembed: " + EnvPython + " is not set")

var (
	once     sync.Once
	startErr error
)

// Start starts the interpreter once per process and reports whether it
// runs. Errors other than ErrNoPython mean EnvPython names a Python that
// could not be embedded.
func Start() error {
	once.Do(func() { startErr = start() })
	return startErr
}

func start() error {
	py := os.Getenv(EnvPython)
	if py == "" {
		return ErrNoPython
	}
	out, err := exec.Command(py, "-c", `import json, sys, sysconfig
print(json.dumps([sysconfig.get_config_var("LIBDIR") + "/" + sysconfig.get_config_var("LDLIBRARY"), sys.base_prefix, sys.path[1:]]))`).Output()
	if err != nil {
		return fmt.Errorf("pyembed: %s: %w", py, err)
	}
	var info []json.RawMessage
	var lib, home string
	var path []string
	if err := json.Unmarshal(out, &info); err != nil || len(info) != 3 ||
		json.Unmarshal(info[0], &lib) != nil || json.Unmarshal(info[1], &home) != nil || json.Unmarshal(info[2], &path) != nil {
		return fmt.Errorf("pyembed: unexpected answer from %s: %q", py, out)
	}
	os.Setenv("PYTHONHOME", home)
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	var buf [256]C.char
	if C.pyembed_start(clib, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("pyembed: %s: %s", lib, C.GoString(&buf[0]))
	}
	p, _ := json.Marshal(path)
	var err2 error
	Do(func() { err2 = Exec("import sys\nsys.path[:] = " + string(p)) })
	return err2
}

// Do runs fn on one locked OS thread holding the GIL. Everything that
// touches Python (Exec, Eval, package pycapsule) must run inside Do.
func Do(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := C.pyembed_ensure()
	defer C.pyembed_release(st)
	fn()
}

// Exec runs Python statements in the __main__ module; a Python exception
// is returned as an error (and cleared).
func Exec(code string) error {
	_, err := run(code, false)
	return err
}

// Eval evaluates a Python expression in __main__ and returns a new
// reference to its value (release it with DecRef).
func Eval(expr string) (uintptr, error) { return run(expr, true) }

func run(code string, eval bool) (uintptr, error) {
	cs := C.CString(code)
	defer C.free(unsafe.Pointer(cs))
	e := C.int(0)
	if eval {
		e = 1
	}
	var ok C.int
	r := C.pyembed_run(cs, e, &ok)
	if ok == 0 {
		return 0, errors.New(TakeError())
	}
	return uintptr(r), nil
}

// Global returns the __main__ global name (a borrowed reference), 0 if
// there is none.
func Global(name string) uintptr {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return uintptr(C.pyembed_global(cs))
}

// SetGlobal binds the __main__ global name to obj (the caller keeps its
// own reference).
func SetGlobal(name string, obj uintptr) error {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	if C.pyembed_set_global(cs, C.uintptr_t(obj)) != 0 {
		return errors.New(TakeError())
	}
	return nil
}

// DecRef drops a reference.
func DecRef(obj uintptr) { C.pyembed_decref(C.uintptr_t(obj)) }

// Pending reports whether a Python exception is set.
func Pending() bool { return C.pyembed_pending() != 0 }

// TakeError returns "TypeName: message" of the pending exception and
// clears it ("" if none is pending).
func TakeError() string {
	var buf [1024]C.char
	C.pyembed_error(&buf[0], C.size_t(len(buf)), 1)
	return C.GoString(&buf[0])
}
