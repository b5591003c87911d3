package main

// The files of package tensorfile: .npy, .npz and safetensors files mapped
// by Go, their tensors taken by NumPy through DLPack
// (tensorfile/testdata/share.py checks that NumPy shares the mapping).

// #include <stdint.h>
import "C"

import (
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/tensorfile"
)

// fileOf returns the file of id, nil if there is none.
func fileOf(id C.int64_t) *tensorfile.File {
	f, _ := lookup[*tensorfile.File](id)
	return f
}

// tensorfile_open opens path as kind 0 (.npy), 1 (.npz) or 2 (safetensors),
// read-write if rw; it returns a file id, or -1 with a ValueError set.
//
//export tensorfile_open
func tensorfile_open(path *C.char, kind, rw C.int) C.int64_t {
	var opts []tensorfile.Option
	if rw != 0 {
		opts = append(opts, tensorfile.ReadWrite())
	}
	var f *tensorfile.File
	var err error
	switch kind {
	case 0:
		f, err = tensorfile.OpenNPY(C.GoString(path), opts...)
	case 1:
		f, err = tensorfile.OpenNPZ(C.GoString(path))
	default:
		f, err = tensorfile.OpenSafetensors(C.GoString(path), opts...)
	}
	if err != nil {
		pycapsule.SetError(false, err.Error())
		return -1
	}
	return register(f)
}

// tensorfile_range stores the file's mapping address and length.
//
//export tensorfile_range
func tensorfile_range(id C.int64_t, addr *C.uintptr_t, size *C.int64_t) {
	if f := fileOf(id); f != nil {
		a, n := f.MappedRange()
		*addr, *size = C.uintptr_t(a), C.int64_t(n)
	}
}

// tensorfile_dlpack is __dlpack__ for tensor index of file id: the four
// arguments are the Python objects __dlpack__ received (borrowed), read by
// pycapsule.DLPack as the array API rules. It returns a new capsule
// reference, or 0 with the exception set.
//
//export tensorfile_dlpack
func tensorfile_dlpack(id C.int64_t, index C.int, stream, maxVersion, dlDevice, copyArg C.uintptr_t) C.uintptr_t {
	f := fileOf(id)
	if f == nil || int(index) >= len(f.Tensors()) {
		pycapsule.SetError(true, "tensorfile: no such file or tensor")
		return 0
	}
	return C.uintptr_t(pycapsule.DLPack(f.Tensors()[index], uintptr(stream), uintptr(maxVersion), uintptr(dlDevice), uintptr(copyArg)))
}

// tensorfile_live returns tensorfile.LiveMappings().
//
//export tensorfile_live
func tensorfile_live() C.int64_t { return C.int64_t(tensorfile.LiveMappings()) }
