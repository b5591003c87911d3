//go:build cgo

package pycapsule_test

import (
	"errors"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/pycapsule/internal/pyembed"
)

// pyBench runs fn holding the GIL with the prelude loaded, or skips.
func pyBench(b *testing.B, fn func()) {
	if err := pyembed.Start(); errors.Is(err, pyembed.ErrNoPython) {
		b.Skip("no Python: set " + pyembed.EnvPython)
	} else if err != nil {
		b.Fatal(err)
	}
	pyembed.Do(func() {
		if err := pycapsule.Init(); err != nil {
			b.Fatal(err)
		}
		if err := pyembed.Exec(prelude + "\nx = np.arange(16.0)\nmv = (1, 3)"); err != nil {
			b.Fatal(err)
		}
		fn()
	})
}

// BenchmarkDLPack: __dlpack__(max_version=(1, 3)) of a Go Array, the
// capsule then dropped unconsumed (its destructor releases the export).
func BenchmarkDLPack(b *testing.B) {
	pyBench(b, func() {
		a := dlpack.NewArray(dlpack.AlignedSlice[float64](16), []int64{4, 4})
		mv, none := pyembed.Global("mv"), pyembed.Global("None")
		for b.Loop() {
			c := pycapsule.DLPack(a, none, mv, none, none)
			if c == 0 {
				b.Fatal(pyembed.TakeError())
			}
			pyembed.DecRef(c)
		}
	})
}

// BenchmarkImport: a NumPy array into Go (its __dlpack__, the capsule
// consumed, the tensor validated) and released.
func BenchmarkImport(b *testing.B) {
	pyBench(b, func() {
		x := pyembed.Global("x")
		for b.Loop() {
			f, err := pycapsule.Import(x)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// BenchmarkReexport: a NumPy array into Go and handed on as a capsule,
// then everything released.
func BenchmarkReexport(b *testing.B) {
	pyBench(b, func() {
		x, mv, none := pyembed.Global("x"), pyembed.Global("mv"), pyembed.Global("None")
		for b.Loop() {
			f, err := pycapsule.Import(x)
			if err != nil {
				b.Fatal(err)
			}
			c := pycapsule.DLPack(f, none, mv, none, none)
			f.Close()
			if c == 0 {
				b.Fatal(pyembed.TakeError())
			}
			pyembed.DecRef(c)
		}
	})
}
