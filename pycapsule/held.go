//go:build cgo

package pycapsule

import (
	"github.com/godlpack/dlpack"
)

// Held is a tensor imported from a Python producer together with the
// producer object, so that handing the tensor on honours each consumer's
// stream. Import alone synchronises once, at the import (stream None: for
// CUDA producers, the legacy default stream); Wrap passes every request
// on but imports nothing. Held does both: its data is the one imported
// tensor (shared, one deleter, as a re-exported dlpack.Foreign), and when
// a consumer's request names a stream for a device tensor, dlpack.Produce
// calls SyncStream, which asks the producer again with that stream
// (obj.__dlpack__(stream=s, max_version=...)), so that the producer
// orders its pending work before s, and releases what it got.
//
// What is synchronised: the producer's work pending on its current stream
// when the consumer asks (for PyTorch and CuPy, the current stream of the
// asking thread at that moment), before the consumer's stream. What is
// not: requests without a stream, Go consumers (dlpack.From takes the
// tensor Go to Go and calls no Python), and work the producer queues
// after the request.
//
// Held keeps a reference to the producer object until Close. DLPack with
// a stream and Close call Python: only with the GIL held (as
// pycapsule.DLPack's callers hold it), never from a goroutine of the Go
// runtime's own.
type Held struct {
	f   dlpack.Foreign
	obj *Object
}

// ImportHeld imports obj's tensor as Import does (opts apply as there)
// and keeps obj (a borrowed reference; Held takes a reference of its own),
// asking obj.__dlpack_device__() first as Wrap does. The caller Closes the
// Held. Errors: those of Wrap and Import; on error nothing is held.
func ImportHeld(obj uintptr, opts ...dlpack.ImportOption) (*Held, error) {
	o, err := Wrap(obj)
	if err != nil {
		return nil, err
	}
	f, err := Import(obj, opts...)
	if err != nil {
		o.Close()
		return nil, err
	}
	return &Held{f: f, obj: o}, nil
}

// Foreign returns the imported tensor (owned by h: h.Close closes it).
func (h *Held) Foreign() dlpack.Foreign { return h.f }

// DLPackDevice implements dlpack.Producer: the tensor's device.
func (h *Held) DLPackDevice() dlpack.Device { return h.f.Device() }

// DescribeTensor implements dlpack.Source as the imported Foreign does:
// consumers share its memory, and the producer's deleter runs once, after
// Close and every consumer's release.
func (h *Held) DescribeTensor(d *dlpack.Description) error { return h.f.DescribeTensor(d) }

// DLPack implements dlpack.Producer through dlpack.Produce, which calls
// SyncStream when req names a stream for a device tensor.
func (h *Held) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(h, req) }

// SyncStream implements dlpack.StreamSyncer: it calls the producer's
// __dlpack__ with stream and the highest version this package reads, and
// releases the tensor it returns. A producer's exception fails the
// request (an error wrapping ErrPython; the exception stays pending);
// dlpack.ErrClosed after Close.
func (h *Held) SyncStream(_ dlpack.Device, stream int64) error {
	m, err := h.obj.DLPack(dlpack.Request{MaxVersion: ConsumerVersion, Stream: stream, HasStream: true})
	if err != nil {
		m.Close() // none comes with an error; if one did, it is ours
		return err
	}
	m.Close()
	return nil
}

// Close drops the reference to the producer object and closes the
// imported tensor (GIL held). Consumers still holding it keep its memory
// until they release it. Close is idempotent.
func (h *Held) Close() error {
	h.obj.Close()
	return h.f.Close()
}
