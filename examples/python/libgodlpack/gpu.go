package main

// What the GPU suite (examples/python/tests_gpu, run by gpu/run.sh on a
// machine with a CUDA device) needs beyond godlpack.py's API: imports with
// options, re-exports that pass the consumer's stream on to the Python
// producer, what Go sees of a tensor, and a CPU read that reports which
// sentinel error refused it. Every function is called with the GIL held
// (ctypes.PyDLL).

// #include <stdint.h>
import "C"

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// Flags of godlpack_import_opts.
const (
	importAssumeWritable  = 1 << iota // dlpack.AssumeWritable
	importAllowHostMemory             // dlpack.AllowHostMemory
	importForwardStream               // keep the producer object: consumers' streams reach it
)

// held is a pycapsule.Held (an import that keeps the Python producer
// object, so that a consumer's stream reaches the producer) that counts
// the streams it passed on, for the GPU suite's stream test.
type held struct{ *pycapsule.Held }

// DLPack hands the tensor on through Produce, with h as the Source so that
// its SyncStream is the one called.
func (h held) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(h, req) }

var (
	streamSyncs atomic.Int64 // streams passed on to producers
	lastStream  atomic.Int64 // the last of them
)

// SyncStream passes the stream on (pycapsule.Held.SyncStream) and counts it.
func (h held) SyncStream(dev dlpack.Device, stream int64) error {
	if err := h.Held.SyncStream(dev, stream); err != nil {
		return err
	}
	streamSyncs.Add(1)
	lastStream.Store(stream)
	return nil
}

// godlpack_import_opts is godlpack_import with options: flags is a sum of
// 1 (AssumeWritable), 2 (AllowHostMemory) and 4 (keep the producer
// object and pass consumers' streams to it: pycapsule.ImportHeld). Returns
// the id, or -1 with an exception set.
//
//export godlpack_import_opts
func godlpack_import_opts(obj C.uintptr_t, flags C.int) C.int64_t {
	var opts []dlpack.ImportOption
	if flags&importAssumeWritable != 0 {
		opts = append(opts, dlpack.AssumeWritable())
	}
	if flags&importAllowHostMemory != 0 {
		opts = append(opts, dlpack.AllowHostMemory())
	}
	if flags&importForwardStream != 0 {
		h, err := pycapsule.ImportHeld(uintptr(obj), opts...)
		if err != nil {
			pycapsule.Raise(err)
			return -1
		}
		return register(&tensor{p: held{h}, addr: h.Foreign().DataAddr(), close: h.Close})
	}
	f, err := pycapsule.Import(uintptr(obj), opts...)
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return register(&tensor{p: f, addr: f.DataAddr(), close: f.Close})
}

// foreignOf returns the imported tensor behind a registry entry.
func foreignOf(t *tensor) (dlpack.Foreign, bool) {
	switch p := t.p.(type) {
	case dlpack.Foreign:
		return p, true
	case held:
		return p.Foreign(), true
	}
	return dlpack.Foreign{}, false
}

// Header of godlpack_tensor_info's output; shape and strides follow.
const infoHeader = 12

// godlpack_tensor_info writes what Go sees of an imported tensor to out
// (room for capN values): device type, device id, type code, bits, lanes,
// ndim, writable, legacy, flags, data address, byte offset, element
// count, then the shape and the strides (in elements). Returns the values
// written, or -1 with an exception set (no such import, closed, or out
// too small).
//
//export godlpack_tensor_info
func godlpack_tensor_info(id C.int64_t, out *C.int64_t, capN C.int) C.int {
	t := lookup(id)
	if t == nil {
		pycapsule.SetError(true, "godlpack: the tensor was freed")
		return -1
	}
	f, ok := foreignOf(t)
	if !ok {
		pycapsule.SetError(true, "godlpack: the tensor is not an import")
		return -1
	}
	if err := f.Err(); err != nil {
		pycapsule.Raise(err)
		return -1
	}
	n := infoHeader + 2*f.NDim()
	if int(capN) < n {
		pycapsule.SetError(false, "godlpack: tensor_info: output too small")
		return -1
	}
	dev, dt := f.Device(), f.DataType()
	v := []int64{int64(dev.Type), int64(dev.ID), int64(dt.Code), int64(dt.Bits), int64(dt.Lanes), int64(f.NDim()),
		b2i(f.Writable()), b2i(f.Legacy()), int64(f.Flags()), int64(f.DataAddr()), int64(f.ByteOffset()), f.Len()}
	v = append(append(v, f.Shape()...), f.Strides()...)
	copy(unsafe.Slice((*int64)(unsafe.Pointer(out)), n), v)
	return C.int(n)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Sentinels godlpack_cpu_sum reports, by their index here (0: none).
var sentinels = []error{nil, dlpack.ErrDevice, dlpack.ErrReadOnly, dlpack.ErrClosed, dlpack.ErrDataType, dlpack.ErrAlignment}

// godlpack_cpu_sum reads an imported tensor on the CPU (dlpack.ViewOf)
// and writes the sum of its elements to *re, *im. It sets no Python
// exception: it returns 0, or the index in sentinels of the error that
// refused the read (len(sentinels) for another), with the error's text
// in msg (capMsg bytes, NUL-terminated).
//
//export godlpack_cpu_sum
func godlpack_cpu_sum(id C.int64_t, re, im *C.double, msg *C.char, capMsg C.int) C.int {
	err := cpuSum(id, re, im)
	if err == nil {
		return 0
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(msg)), int(capMsg))
	buf[copy(buf[:len(buf)-1], err.Error())] = 0
	for i, s := range sentinels[1:] {
		if errors.Is(err, s) {
			return C.int(i + 1)
		}
	}
	return C.int(len(sentinels))
}

func cpuSum(id C.int64_t, re, im *C.double) error {
	t := lookup(id)
	if t == nil {
		return dlpack.ErrClosed
	}
	f, ok := foreignOf(t)
	if !ok {
		return errors.New("godlpack: the tensor is not an import")
	}
	k, ok := kinds[f.DataType()]
	if !ok {
		return errors.New("godlpack: cannot sum " + f.DataType().String())
	}
	s, err := k.sum(f)
	if err != nil {
		return err
	}
	*re, *im = C.double(real(s)), C.double(imag(s))
	return nil
}

// godlpack_gpu_stats writes out[0:8]: dlpack.Outstanding, the Stats
// counters GoExports, BufferExports, LeakedImports, BadReleases, CBlocks,
// then the streams passed on to producers (held.SyncStream) and the last
// of them.
//
//export godlpack_gpu_stats
func godlpack_gpu_stats(out *C.int64_t) {
	s := dlpack.ReadStats()
	v := []int64{dlpack.Outstanding(), s.GoExports, s.BufferExports, s.LeakedImports, s.BadReleases, s.CBlocks,
		streamSyncs.Load(), lastStream.Load()}
	copy(unsafe.Slice((*int64)(unsafe.Pointer(out)), len(v)), v)
}

// godlpack_go_version writes runtime.Version() (NUL-terminated) to buf.
//
//export godlpack_go_version
func godlpack_go_version(buf *C.char, capBuf C.int) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(capBuf))
	b[copy(b[:len(b)-1], runtime.Version())] = 0
}

// godlpack_import_table imports obj's tensor through a DLPack 1.3
// exchange table (api: the DLPackExchangeAPI* of obj's type's
// __dlpack_c_exchange_api__ capsule): managed_tensor_from_py_object_no_sync,
// which synchronises no stream. flags as for godlpack_import_opts (4 is
// ignored: the table is not asked again). Returns the id, or -1 with an
// exception set (the table's own when it failed).
//
//export godlpack_import_table
func godlpack_import_table(obj C.uintptr_t, api unsafe.Pointer, flags C.int) C.int64_t {
	t, err := tableOf(api)
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	m, err := fromTable(t, uintptr(obj))
	if err != nil {
		pycapsule.Raise(err) // an exception the table set stays as it is
		return -1
	}
	var opts []dlpack.ImportOption
	if flags&importAssumeWritable != 0 {
		opts = append(opts, dlpack.AssumeWritable())
	}
	if flags&importAllowHostMemory != 0 {
		opts = append(opts, dlpack.AllowHostMemory())
	}
	f, err := m.Import(opts...)
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return register(&tensor{p: f, addr: f.DataAddr(), close: f.Close})
}

// godlpack_work_stream asks a DLPack 1.3 exchange table's
// current_work_stream for the device (devType, devID) and writes the
// stream to *out. Returns 0, or -1 with an exception set.
//
//export godlpack_work_stream
func godlpack_work_stream(api unsafe.Pointer, devType, devID C.int, out *C.int64_t) C.int {
	c, err := dlpack.OpenExchangeAPI(api)
	if err == nil {
		var s uintptr
		s, err = c.CurrentWorkStream(dlpack.Device{Type: dlpack.DeviceType(devType), ID: int32(devID)})
		*out = C.int64_t(s)
	}
	if err != nil {
		pycapsule.Raise(err)
		return -1
	}
	return 0
}
