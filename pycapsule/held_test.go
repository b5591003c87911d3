//go:build cgo

package pycapsule_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/pycapsule/internal/pyembed"
)

// deviceAddr is the CUDA address deviceTensor describes: nothing
// dereferences device memory on this path, so no GPU is needed to hand
// such tensors around.
const deviceAddr = 0x7f5a00000000

// deviceTensor describes four float32 of CUDA memory, counting the
// releases of the tensors made from it.
type deviceTensor struct{ releases *atomic.Int64 }

type countRelease struct{ n *atomic.Int64 }

func (c countRelease) ReleaseTensor() { c.n.Add(1) }

func (s deviceTensor) DescribeTensor(d *dlpack.Description) error {
	d.Addr, d.Size = deviceAddr, 16
	d.DType, d.Shape = dlpack.Float32, []int64{4}
	d.Device = dlpack.Device{Type: dlpack.CUDA, ID: 0}
	d.Owner = countRelease{s.releases}
	return nil
}

// heldPrelude is a CUDA producer in Python: it hands out capsules made in
// Go, one per __dlpack__ call, and records each call's arguments.
const heldPrelude = `
class Streamed:
    def __init__(self, caps):
        self.caps, self.calls, self.fail = caps, [], False
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if self.fail:
            raise KeyError("the producer refuses the stream")
        return self.caps.pop(0)
`

// TestImportHeld: a consumer's stream reaches the producer object that
// Held keeps, requests without a stream and Go consumers call no Python,
// and every tensor the producer handed out is released once.
func TestImportHeld(t *testing.T) {
	py(t, func(p *session) {
		var releases atomic.Int64
		src := deviceTensor{&releases}
		p.exec(heldPrelude)
		for i := range 3 {
			m, err := dlpack.Produce(src, dlpack.Request{})
			if err != nil {
				t.Fatal(err)
			}
			p.bind(fmt.Sprintf("c%d", i), pycapsule.Capsule(m))
		}
		p.exec("s = Streamed([c0, c1, c2]); del c0, c1, c2; r0 = sys.getrefcount(s)")

		h, err := pycapsule.ImportHeld(pyembed.Global("s"))
		if err != nil {
			t.Fatal(err)
		}
		p.check("s.calls == [{'max_version': (1, 3)}] and sys.getrefcount(s) == r0 + 1")
		f := h.Foreign()
		if f.DataAddr() != deviceAddr || h.DLPackDevice() != (dlpack.Device{Type: dlpack.CUDA}) {
			t.Fatalf("imported %v at %#x", f, f.DataAddr())
		}

		// A Go request with a stream: the producer is asked with it, and
		// its answer released; the data handed on is the imported tensor.
		m1, err := h.DLPack(dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: 42, HasStream: true})
		if err != nil {
			t.Fatal(err)
		}
		p.check("s.calls[1] == {'stream': 42, 'max_version': (1, 3)}")
		if m1.Versioned == nil || m1.Versioned.DLTensor.Data != deviceAddr {
			t.Errorf("re-export: %+v", m1)
		}
		if n := releases.Load(); n != 1 {
			t.Errorf("releases after the stream request = %d, want 1 (the producer's answer)", n)
		}

		// No stream, and Go consumers: no Python call.
		m2, err := h.DLPack(dlpack.Request{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := dlpack.From(h)
		if err != nil {
			t.Fatal(err)
		}
		if g.DataAddr() != deviceAddr {
			t.Errorf("From(Held) at %#x", g.DataAddr())
		}
		p.check("len(s.calls) == 2")

		// A Python consumer's __dlpack__(stream=7), through pycapsule.DLPack.
		none := p.eval("None")
		p.bind("cap", pycapsule.DLPack(h, p.eval("7"), p.eval("(1, 3)"), none, none))
		p.check("s.calls[2] == {'stream': 7, 'max_version': (1, 3)}")
		p.exec("del cap; gc.collect()") // unconsumed: its destructor releases it
		if n := releases.Load(); n != 2 {
			t.Errorf("releases = %d, want 2", n)
		}

		// The producer's exception fails the request and stays pending.
		p.exec("s.fail = True")
		if _, err := h.DLPack(dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: 9, HasStream: true}); !errors.Is(err, pycapsule.ErrPython) {
			t.Errorf("a refusing producer: %v", err)
		} else if e := raised(t); !strings.Contains(e, "refuses the stream") {
			t.Errorf("exception %q", e)
		}

		// The imported tensor is released once, after Close and every consumer.
		h.Close()
		h.Close()
		p.check("sys.getrefcount(s) == r0")
		if _, err := h.DLPack(dlpack.Request{}); !errors.Is(err, dlpack.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
		m1.Close()
		g.Close()
		if n := releases.Load(); n != 2 {
			t.Errorf("releases = %d before the last consumer let go, want 2", n)
		}
		m2.Close()
		if n := releases.Load(); n != 3 {
			t.Errorf("releases = %d, want 3 (each tensor once)", n)
		}
		if n := dlpack.Outstanding(); n != 0 {
			t.Errorf("Outstanding() = %d", n)
		}

		// Refusals leave nothing held.
		if _, err := pycapsule.ImportHeld(p.eval("np.ones(2).__dlpack__()")); !errors.Is(err, pycapsule.ErrNoDLPack) {
			t.Errorf("a capsule: %v", err)
		}
		p.exec("fl = Failing(); r1 = sys.getrefcount(fl)")
		if _, err := pycapsule.ImportHeld(pyembed.Global("fl")); !errors.Is(err, pycapsule.ErrPython) {
			t.Errorf("a failing producer: %v", err)
		} else {
			raised(t)
		}
		p.check("sys.getrefcount(fl) == r1")
	})
}
