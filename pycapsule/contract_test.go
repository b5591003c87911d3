//go:build cgo

package pycapsule_test

import (
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/misbehave"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/pycapsule/internal/pyembed"
)

// TestContractBreakers: the producers of internal/misbehave through
// __dlpack__ and __dlpack_device__ (pycapsule.DLPack, DLPackDevice):
// a BufferError carrying the error dlpack.From gives for the same
// producer, never a panic (which would kill the Python process), and
// nothing outstanding.
func TestContractBreakers(t *testing.T) {
	py(t, func(p *session) {
		none := p.eval("None")
		versions := []string{"None", "(1, 3)"}
		for _, c := range misbehave.Cases() {
			_, fromErr := dlpack.From(c.P)
			for _, v := range versions {
				got := pycapsule.DLPack(c.P, none, p.eval(v), none, none)
				if got != 0 {
					pyembed.DecRef(got)
					t.Errorf("%s, max_version %s: a capsule, want an exception", c.Name, v)
					continue
				}
				e := raised(t)
				if want := "BufferError: " + fromErr.Error(); e != want {
					t.Errorf("%s, max_version %s: %s, want %s", c.Name, v, e, want)
				}
				if n := dlpack.Outstanding(); n != 0 {
					t.Errorf("%s, max_version %s: %d exports outstanding", c.Name, v, n)
				}
			}
			if dev := pycapsule.DLPackDevice(c.P); dev != 0 {
				pyembed.DecRef(dev) // a producer with a device answers
			} else if e := raised(t); !strings.HasPrefix(e, "BufferError: "+dlpack.ErrNilPointer.Error()) {
				t.Errorf("%s: __dlpack_device__ raised %s, want a BufferError for a nil producer", c.Name, e)
			}
		}
	})
}
