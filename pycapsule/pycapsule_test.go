//go:build cgo

package pycapsule_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/pycapsule/internal/pyembed"
)

// prelude is the Python every test can use: NumPy, a holder that hands a
// capsule made in Go to NumPy's from_dlpack, and producers that record or
// fail.
const prelude = `
import gc, sys
import numpy as np

class Holder:
    def __init__(self, cap, dev=(1, 0)):
        self.cap, self.dev = cap, dev
    def __dlpack__(self, **kwargs):
        c, self.cap = self.cap, None
        return c
    def __dlpack_device__(self):
        return self.dev

class Recording:
    def __init__(self, x):
        self.x, self.calls = x, []
    def __dlpack_device__(self):
        return self.x.__dlpack_device__()
    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.x.__dlpack__(**kwargs)

class Old:
    def __init__(self, x):
        self.x, self.calls = x, []
    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return self.x.__dlpack__()

class Failing:
    def __dlpack__(self, **kwargs):
        raise KeyError("from the producer")

def aligned(n, dtype=np.float64):
    b = np.zeros(n * np.dtype(dtype).itemsize + 64, np.uint8)
    off = -b.ctypes.data % 64
    return b[off:off + n * np.dtype(dtype).itemsize].view(dtype)
`

// py runs fn holding the GIL, with the prelude loaded; it skips the test
// when no Python is configured (pyembed.EnvPython).
func py(t *testing.T, fn func(p *session)) {
	t.Helper()
	if err := pyembed.Start(); errors.Is(err, pyembed.ErrNoPython) {
		t.Skip("no Python: set " + pyembed.EnvPython + " (make python does)")
	} else if err != nil {
		t.Fatal(err)
	}
	pyembed.Do(func() {
		p := &session{t: t}
		defer p.close()
		if err := pycapsule.Init(); err != nil {
			t.Fatal(err)
		}
		p.exec(prelude)
		fn(p)
		p.exec("gc.collect()")
	})
}

// session holds the references a test took, dropped at its end.
type session struct {
	t    *testing.T
	refs []uintptr
}

func (p *session) close() {
	for _, r := range p.refs {
		pyembed.DecRef(r)
	}
	if pyembed.Pending() {
		p.t.Errorf("a Python exception was left pending: %s", pyembed.TakeError())
	}
}

func (p *session) exec(code string) {
	p.t.Helper()
	if err := pyembed.Exec(code); err != nil {
		p.t.Fatalf("%v\nin:\n%s", err, code)
	}
}

// eval returns a reference owned by the session.
func (p *session) eval(expr string) uintptr {
	p.t.Helper()
	r, err := pyembed.Eval(expr)
	if err != nil {
		p.t.Fatalf("%v\nin: %s", err, expr)
	}
	p.refs = append(p.refs, r)
	return r
}

// truth evaluates a Python condition.
func (p *session) check(cond string) {
	p.t.Helper()
	if err := pyembed.Exec("assert " + cond + ", " + fmt.Sprintf("%q", cond)); err != nil {
		p.t.Error(err)
	}
}

// bind binds a new reference (taking it over) to a Python global.
func (p *session) bind(name string, obj uintptr) {
	p.t.Helper()
	if obj == 0 {
		p.t.Fatalf("%s: no object; pending: %s", name, pyembed.TakeError())
	}
	if err := pyembed.SetGlobal(name, obj); err != nil {
		p.t.Fatal(err)
	}
	pyembed.DecRef(obj)
}

// raised returns the pending exception as "Type: message" and clears it.
func raised(t *testing.T) string {
	t.Helper()
	if !pyembed.Pending() {
		t.Fatal("no Python exception set")
	}
	return pyembed.TakeError()
}

func TestInitNeedsPython(t *testing.T) {
	if !errors.Is(initBeforePython, pycapsule.ErrNoPython) {
		t.Fatalf("Init outside a Python process = %v, want ErrNoPython", initBeforePython)
	}
	py(t, func(p *session) {}) // Init succeeds inside (checked by py)
}

func TestParseRequest(t *testing.T) {
	py(t, func(p *session) {
		cuda := dlpack.Device{Type: dlpack.CUDA}
		rocm := dlpack.Device{Type: dlpack.ROCM}
		for _, c := range []struct {
			dev                              dlpack.Device
			stream, maxVersion, device, copy string
			want                             dlpack.Request
		}{
			{dlpack.CPUDevice, "None", "None", "None", "None", dlpack.Request{Legacy: true}},
			{dlpack.CPUDevice, "None", "(1, 3)", "None", "None", dlpack.Request{MaxVersion: dlpack.Version{Major: 1, Minor: 3}}},
			{dlpack.CPUDevice, "None", "(0, 8)", "None", "None", dlpack.Request{Legacy: true}},
			{dlpack.CPUDevice, "None", "(-1, 0)", "None", "None", dlpack.Request{Legacy: true}},
			{dlpack.CPUDevice, "None", "(1, -1)", "None", "None", dlpack.Request{MaxVersion: dlpack.Version{Major: 1}}},
			{dlpack.CPUDevice, "None", "(True, np.int64(2))", "None", "None", dlpack.Request{MaxVersion: dlpack.Version{Major: 1, Minor: 2}}},
			{dlpack.CPUDevice, "None", "(2**40, 0)", "None", "None", dlpack.Request{MaxVersion: dlpack.Version{Major: 1<<32 - 1}}},
			{cuda, "-1", "None", "None", "None", dlpack.Request{Legacy: true, Stream: -1, HasStream: true}},
			{cuda, "1", "None", "None", "None", dlpack.Request{Legacy: true, Stream: 1, HasStream: true}},
			{cuda, "2**62", "None", "None", "None", dlpack.Request{Legacy: true, Stream: 1 << 62, HasStream: true}},
			{rocm, "0", "None", "None", "None", dlpack.Request{Legacy: true, Stream: 0, HasStream: true}},
			{cuda, "None", "None", "(2, 1)", "True", dlpack.Request{Legacy: true, Device: dlpack.Device{Type: dlpack.CUDA, ID: 1}, Copy: dlpack.CopyAlways}},
			{dlpack.CPUDevice, "None", "None", "(1, 0)", "False", dlpack.Request{Legacy: true, Device: dlpack.CPUDevice, Copy: dlpack.CopyNever}},
			{dlpack.CPUDevice, "None", "None", "(2, 2**31 - 1)", "None", dlpack.Request{Legacy: true, Device: dlpack.Device{Type: dlpack.CUDA, ID: 1<<31 - 1}}},
		} {
			got, err := pycapsule.ParseRequest(c.dev, p.eval(c.stream), p.eval(c.maxVersion), p.eval(c.device), p.eval(c.copy))
			if err != nil || got != c.want {
				t.Errorf("%v: stream=%s max_version=%s dl_device=%s copy=%s: %+v, %v; want %+v", c.dev, c.stream, c.maxVersion, c.device, c.copy, got, err, c.want)
			}
		}
		if got, err := pycapsule.ParseRequest(dlpack.CPUDevice, 0, 0, 0, 0); err != nil || got != (dlpack.Request{Legacy: true}) {
			t.Errorf("NULL arguments read as None: %+v, %v", got, err)
		}
		p.exec("class Bad:\n    def __bool__(self): raise RuntimeError('no truth')\n    def __index__(self): raise RuntimeError('no index')")
		for _, c := range []struct {
			dev        dlpack.Device
			arg, value string
			exc        pycapsule.Exception
		}{
			{dlpack.CPUDevice, "max_version", "1", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "[1, 3]", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "(1,)", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "('1', '3')", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "(1.0, 3)", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "(Bad(), 3)", pycapsule.TypeError},
			{dlpack.CPUDevice, "max_version", "(1, 2**70)", pycapsule.OverflowError},
			{dlpack.CPUDevice, "dl_device", "'cpu'", pycapsule.TypeError},
			{dlpack.CPUDevice, "dl_device", "[1, 0]", pycapsule.TypeError},
			{dlpack.CPUDevice, "dl_device", "(1, 0, 0)", pycapsule.TypeError},
			{dlpack.CPUDevice, "dl_device", "(1.0, 0)", pycapsule.TypeError},
			{dlpack.CPUDevice, "dl_device", "(0, 0)", pycapsule.BufferError},
			{dlpack.CPUDevice, "dl_device", "(-1, 0)", pycapsule.BufferError},
			{dlpack.CPUDevice, "dl_device", "(1, -1)", pycapsule.BufferError},
			{dlpack.CPUDevice, "dl_device", "(2**31, 0)", pycapsule.OverflowError},
			{dlpack.CPUDevice, "dl_device", "(1, -2**31 - 1)", pycapsule.OverflowError},
			{dlpack.CPUDevice, "dl_device", "(1, 2**70)", pycapsule.OverflowError},
			{dlpack.CPUDevice, "stream", "-1", pycapsule.RuntimeError},
			{dlpack.CPUDevice, "stream", "0", pycapsule.RuntimeError},
			{dlpack.CPUDevice, "stream", "'s'", pycapsule.RuntimeError},
			{dlpack.Device{}, "stream", "5", pycapsule.RuntimeError},
			{cuda, "stream", "'s'", pycapsule.TypeError},
			{cuda, "stream", "1.5", pycapsule.TypeError},
			{cuda, "stream", "2**70", pycapsule.OverflowError},
			{cuda, "stream", "-2", pycapsule.ValueError},
			{cuda, "stream", "0", pycapsule.ValueError},
			{rocm, "stream", "1", pycapsule.ValueError},
			{rocm, "stream", "2", pycapsule.ValueError},
			{dlpack.CPUDevice, "copy", "'yes'", pycapsule.ValueError},
			{dlpack.CPUDevice, "copy", "1", pycapsule.ValueError},
			{dlpack.CPUDevice, "copy", "0", pycapsule.ValueError},
			{dlpack.CPUDevice, "copy", "np.True_", pycapsule.ValueError},
			{dlpack.CPUDevice, "copy", "Bad()", pycapsule.ValueError},
		} {
			args := map[string]uintptr{"stream": p.eval("None"), "max_version": p.eval("None"), "dl_device": p.eval("None"), "copy": p.eval("None")}
			args[c.arg] = p.eval(c.value)
			_, err := pycapsule.ParseRequest(c.dev, args["stream"], args["max_version"], args["dl_device"], args["copy"])
			var ae *pycapsule.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, pycapsule.ErrArgument) || ae.Arg != c.arg || ae.Exception != c.exc ||
				!strings.Contains(err.Error(), c.arg+" = ") {
				t.Errorf("%v %s=%s: %v (%+v); want an ArgError naming it, %v", c.dev, c.arg, c.value, err, ae, c.exc)
			}
			if pyembed.Pending() {
				t.Errorf("%s=%s: exception left pending: %s", c.arg, c.value, pyembed.TakeError())
			}
		}
	})
}

func uintptrOf[T any](xs []T) uintptr { return uintptr(unsafe.Pointer(&xs[0])) }

func TestDLPackToNumPy(t *testing.T) {
	py(t, func(p *session) {
		data := dlpack.AlignedSlice[float64](6)
		for i := range data {
			data[i] = float64(i)
		}
		a := dlpack.NewArray(data, []int64{2, 3})
		none := p.eval("None")
		addr := fmt.Sprint(uintptrOf(data))

		p.bind("cap", pycapsule.DLPack(a, none, p.eval("(1, 3)"), none, none))
		p.check(`'"dltensor_versioned"' in repr(cap)`)
		p.exec("a = np.from_dlpack(Holder(cap)); del cap")
		p.check("a.tolist() == [[0, 1, 2], [3, 4, 5]] and a.flags.writeable and a.ctypes.data == " + addr)
		p.exec("a[1, 2] = 42")
		if data[5] != 42 {
			t.Errorf("a NumPy write did not reach Go memory: %v", data)
		}

		p.bind("cap", pycapsule.DLPack(a, none, none, none, none))
		p.check(`'"dltensor"' in repr(cap)`)
		p.exec("b = np.from_dlpack(Holder(cap)); del cap")
		p.check("b.ctypes.data == " + addr)

		p.bind("cap", pycapsule.DLPack(a, none, p.eval("(1, 0)"), none, p.eval("True")))
		p.exec("c = np.from_dlpack(Holder(cap)); del cap")
		p.check("c.ctypes.data != " + addr + " and c.tolist() == a.tolist() and c.flags.writeable")

		a.ReadOnly = true
		p.bind("cap", pycapsule.DLPack(a, none, p.eval("(1, 3)"), none, none))
		p.exec("d = np.from_dlpack(Holder(cap)); del cap")
		p.check("not d.flags.writeable and d.ctypes.data == " + addr)
		p.bind("cap", pycapsule.DLPack(a, none, none, none, none)) // legacy + read-only: a copy
		p.check(`'"dltensor"' in repr(cap)`)
		p.exec("e = np.from_dlpack(Holder(cap)); del cap")
		p.check("e.ctypes.data != " + addr + " and e.tolist() == a.tolist()")

		if n := dlpack.Outstanding(); n == 0 {
			t.Error("Outstanding() = 0 while NumPy holds Go memory")
		}
		p.exec("del a, b, c, d, e; gc.collect()")
		if n := dlpack.Outstanding(); n != 0 {
			t.Errorf("Outstanding() = %d after NumPy let go", n)
		}
		p.bind("dev", pycapsule.DLPackDevice(a))
		p.check("dev == (1, 0)")
	})
}

func TestDLPackRefusals(t *testing.T) {
	py(t, func(p *session) {
		a := dlpack.NewArray(dlpack.AlignedSlice[int32](4), []int64{4})
		a.ReadOnly = true
		none := p.eval("None")
		for _, c := range []struct {
			stream, maxVersion, device, copy string
			want                             string
		}{
			{"1", "(1, 3)", "None", "None", "RuntimeError: pycapsule: invalid __dlpack__ argument: stream = 1"},
			{"None", "(1, 3)", "(0, 0)", "None", "BufferError: pycapsule: invalid __dlpack__ argument: dl_device = (0, 0)"},
			{"None", "(1, 3)", "(1, 2**31)", "None", "OverflowError: pycapsule: invalid __dlpack__ argument: dl_device = (1, 2147483648)"},
			{"None", "(1, 3)", "None", "'yes'", "ValueError: pycapsule: invalid __dlpack__ argument: copy = 'yes'"},
			{"None", "(1, 3)", "(2, 0)", "None", "BufferError: dlpack: invalid device: request.device"},
			{"None", "None", "None", "False", "BufferError: dlpack: tensor is read-only"},
			{"None", "'x'", "None", "None", "TypeError: pycapsule: invalid __dlpack__ argument: max_version = 'x'"},
			{"None", "(1, 2**64)", "None", "None", "OverflowError: pycapsule: invalid __dlpack__ argument: max_version = (1, 18446744073709551616)"},
		} {
			c0 := dlpack.Outstanding()
			got := pycapsule.DLPack(a, p.eval(c.stream), p.eval(c.maxVersion), p.eval(c.device), p.eval(c.copy))
			if got != 0 {
				t.Errorf("%+v: a capsule, want %s", c, c.want)
				pyembed.DecRef(got)
				continue
			}
			if e := raised(t); !strings.HasPrefix(e, c.want) {
				t.Errorf("%+v: %s, want %s...", c, e, c.want)
			}
			if dlpack.Outstanding() != c0 {
				t.Errorf("%+v: an export left outstanding", c)
			}
		}
		if pycapsule.DLPack(nil, none, none, none, none) != 0 || !strings.HasPrefix(raised(t), "BufferError") {
			t.Error("a nil producer: want BufferError")
		}
		if pycapsule.Capsule(dlpack.Managed{}) != 0 || !strings.HasPrefix(raised(t), "BufferError") {
			t.Error("the zero Managed: want BufferError")
		}
	})
}

func TestRaise(t *testing.T) {
	py(t, func(p *session) {
		for _, c := range []struct {
			err  error
			want string
		}{
			{&pycapsule.ArgError{Arg: "copy", Value: "x", Exception: pycapsule.TypeError}, "TypeError"},
			{&pycapsule.ArgError{Arg: "stream", Value: "0"}, "ValueError"},
			{&pycapsule.ArgError{Arg: "stream", Value: "0", Exception: pycapsule.RuntimeError}, "RuntimeError"},
			{fmt.Errorf("wrapped: %w", &pycapsule.ArgError{Arg: "dl_device", Exception: pycapsule.OverflowError}), "OverflowError"},
			{&pycapsule.ArgError{Arg: "dl_device", Exception: pycapsule.BufferError}, "BufferError"},
			{pycapsule.ErrNotCapsule, "ValueError"},
			{fmt.Errorf("wrapped: %w", pycapsule.ErrNoDLPack), "TypeError"},
			{dlpack.ErrReadOnly, "BufferError"},
			{pycapsule.ErrPython, "BufferError"}, // claims an exception that is not pending: still one is set
		} {
			pycapsule.Raise(c.err)
			if e := raised(t); !strings.HasPrefix(e, c.want+": ") {
				t.Errorf("Raise(%v): %s, want %s", c.err, e, c.want)
			}
		}
		for e := pycapsule.ValueError; e <= pycapsule.RuntimeError; e++ {
			pycapsule.Raise(&pycapsule.ArgError{Arg: "copy", Exception: e})
			if got := raised(t); !strings.HasPrefix(got, e.String()+": ") {
				t.Errorf("Raise(ArgError{Exception: %v}): %s", e, got)
			}
		}
		if s := pycapsule.Exception(9).String(); s != "Exception(9)" {
			t.Errorf("Exception(9).String() = %q", s)
		}
		pycapsule.Raise(nil)
		if pyembed.Pending() {
			t.Errorf("Raise(nil) set %s", pyembed.TakeError())
		}
	})
}

func TestImport(t *testing.T) {
	py(t, func(p *session) {
		p.exec("x = np.arange(6.0).reshape(2, 3); r0 = sys.getrefcount(x)")
		f, err := pycapsule.Import(pyembed.Global("x"))
		if err != nil {
			t.Fatal(err)
		}
		p.check("sys.getrefcount(x) == r0 + 1")
		xs, err := dlpack.Slice[float64](f)
		if err != nil || fmt.Sprint(xs) != "[0 1 2 3 4 5]" || f.Legacy() || !f.Writable() || fmt.Sprint(f.Shape()) != "[2 3]" {
			t.Errorf("NumPy's tensor in Go: %v %v, legacy %v writable %v shape %v", xs, err, f.Legacy(), f.Writable(), f.Shape())
		}
		p.check("x.ctypes.data == " + fmt.Sprint(f.DataAddr()))
		f.Close()
		p.check("sys.getrefcount(x) == r0")

		// A legacy capsule, taken directly: read-only unless assumed writable.
		p.exec("cap = x.__dlpack__()")
		f, err = pycapsule.Import(pyembed.Global("cap"))
		if err != nil || !f.Legacy() || f.Writable() {
			t.Errorf("legacy capsule: %v, legacy %v writable %v", err, f.Legacy(), f.Writable())
		}
		f.Close()
		p.check(`'"used_dltensor"' in repr(cap)`)
		if _, err := pycapsule.Import(pyembed.Global("cap")); !errors.Is(err, pycapsule.ErrNotCapsule) {
			t.Errorf("a used capsule: %v, want ErrNotCapsule", err)
		}

		// A producer without max_version is asked again bare.
		p.exec("old = Old(x)")
		f, err = pycapsule.Import(pyembed.Global("old"), dlpack.AssumeWritable())
		if err != nil || !f.Legacy() || !f.Writable() {
			t.Errorf("old producer: %v, legacy %v writable %v", err, f.Legacy(), f.Writable())
		}
		f.Close()
		p.check("old.calls == [None]")
		p.exec("del old, cap")

		// Refusals: the tensor is released, the producer's exception kept.
		if _, err := pycapsule.Import(pyembed.Global("x"), dlpack.RequireDataType(dlpack.Float32)); !errors.Is(err, dlpack.ErrRequirement) {
			t.Errorf("wrong data type: %v", err)
		}
		p.check("sys.getrefcount(x) == r0")
		if _, err := pycapsule.Import(p.eval("[1, 2]")); !errors.Is(err, pycapsule.ErrNoDLPack) || pyembed.Pending() {
			t.Errorf("a list: %v", err)
		}
		if _, err := pycapsule.Import(0); !errors.Is(err, pycapsule.ErrNoDLPack) {
			t.Errorf("NULL: %v", err)
		}
		if _, err := pycapsule.Wrap(0); !errors.Is(err, pycapsule.ErrNoDLPack) {
			t.Errorf("Wrap(NULL): %v", err)
		}
		if _, err := pycapsule.Import(p.eval("Failing()")); !errors.Is(err, pycapsule.ErrPython) || !strings.Contains(err.Error(), "KeyError") {
			t.Errorf("a failing producer: %v", err)
		} else if e := raised(t); !strings.HasPrefix(e, "KeyError") {
			t.Errorf("pending: %s, want the producer's KeyError", e)
		}
		p.exec("class Answer:\n    def __dlpack__(self, **kw): return 42")
		if _, err := pycapsule.Import(p.eval("Answer()")); !errors.Is(err, pycapsule.ErrNotCapsule) || !strings.Contains(err.Error(), "42") {
			t.Errorf("a non-capsule result: %v", err)
		}
		sum := 0.0
		err = pycapsule.Borrow(pyembed.Global("x"), func(f dlpack.Foreign) error {
			v, err := dlpack.ViewOf[float64](f)
			for _, x := range v.All() {
				sum += x
			}
			return err
		})
		if err != nil || sum != 15 {
			t.Errorf("Borrow: %v, %v", sum, err)
		}
		p.check("sys.getrefcount(x) == r0")
	})
}

func TestWrap(t *testing.T) {
	py(t, func(p *session) {
		p.exec("x = aligned(4); x[:] = [1, 2, 3, 4]; rec = Recording(x); r0 = sys.getrefcount(rec)")
		o, err := pycapsule.Wrap(pyembed.Global("rec"))
		if err != nil {
			t.Fatal(err)
		}
		p.check("sys.getrefcount(rec) == r0 + 1")
		if o.DLPackDevice() != dlpack.CPUDevice {
			t.Errorf("device %v", o.DLPackDevice())
		}
		for _, c := range []struct {
			req  dlpack.Request
			want string
		}{
			{dlpack.Request{Legacy: true}, "{}"},
			{dlpack.Request{}, "{'max_version': (1, 3)}"},
			{dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways, Device: dlpack.CPUDevice}, "{'max_version': (1, 3), 'dl_device': (1, 0), 'copy': True}"},
			{dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyNever}, "{'max_version': (1, 3), 'copy': False}"},
		} {
			m, err := o.DLPack(c.req)
			if err != nil {
				t.Errorf("%+v: %v", c.req, err)
				continue
			}
			p.check("str(rec.calls[-1]) == " + fmt.Sprintf("%q", c.want))
			if (m.Versioned != nil) != !c.req.IsLegacy() {
				t.Errorf("%+v: versioned %v", c.req, m.Versioned != nil)
			}
			m.Close()
		}
		// A stream reaches the producer; NumPy refuses it on the CPU itself.
		if _, err := o.DLPack(dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: 7, HasStream: true}); !errors.Is(err, pycapsule.ErrPython) {
			t.Errorf("stream: %v, want NumPy's own error", err)
		} else {
			raised(t)
		}
		p.check("rec.calls[-1] == {'stream': 7, 'max_version': (1, 3)}")
		p.exec("rec.calls.clear()")

		f, err := dlpack.From(o)
		if err != nil {
			t.Fatal(err)
		}
		xs, err := dlpack.Slice[float64](f)
		if err != nil || fmt.Sprint(xs) != "[1 2 3 4]" {
			t.Errorf("From(Object): %v %v", xs, err)
		}
		p.check("len(rec.calls) == 1 and x.ctypes.data == " + fmt.Sprint(f.DataAddr()))
		f.Close()

		o.Close()
		o.Close()
		p.check("sys.getrefcount(rec) == r0")
		if _, err := o.DLPack(dlpack.Request{}); !errors.Is(err, dlpack.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
		if _, err := pycapsule.Wrap(p.eval("x.__dlpack__()")); !errors.Is(err, pycapsule.ErrNoDLPack) {
			t.Errorf("wrapping a capsule: %v", err)
		}
		p.exec("class BadDevice:\n    def __dlpack_device__(self): return 'cpu'")
		var ae *pycapsule.ArgError
		if _, err := pycapsule.Wrap(p.eval("BadDevice()")); !errors.As(err, &ae) || ae.Exception != pycapsule.TypeError {
			t.Errorf("a bad __dlpack_device__: %v", err)
		}
	})
}

// TestReexport hands a NumPy array imported into Go back to NumPy: the
// same memory, and NumPy's deleter (the array's reference) runs once,
// after both the Go owner and the consumer let go, in either order.
func TestReexport(t *testing.T) {
	for _, goFirst := range []bool{true, false} {
		py(t, func(p *session) {
			p.exec("x = aligned(8); x[:] = np.arange(8.0); r0 = sys.getrefcount(x)")
			f, err := pycapsule.Import(pyembed.Global("x"))
			if err != nil {
				t.Fatal(err)
			}
			none := p.eval("None")
			p.bind("cap", pycapsule.DLPack(f, none, p.eval("(1, 3)"), none, none))
			p.exec("y = np.from_dlpack(Holder(cap)); del cap")
			p.check("y.ctypes.data == x.ctypes.data and y.tolist() == x.tolist() and y.flags.writeable")
			p.check("sys.getrefcount(x) == r0 + 1")
			if goFirst {
				f.Close()
				p.check("sys.getrefcount(x) == r0 + 1")
				p.exec("del y; gc.collect()")
			} else {
				p.exec("del y; gc.collect()")
				p.check("sys.getrefcount(x) == r0 + 1")
				f.Close()
			}
			p.check("sys.getrefcount(x) == r0")
		})
	}
}

// Entry points called on a thread without the GIL (a library loaded with
// ctypes.CDLL) fail with ErrNoGIL and read nothing, rather than calling
// into Python unguarded.
func TestNoGIL(t *testing.T) {
	py(t, func(p *session) {
		obj := p.eval("np.arange(3.0)")
		o, err := pycapsule.Wrap(obj)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		errs := make(chan error, 5)
		go func() { // another OS thread: pyembed.Do keeps the GIL on its own
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			_, err := pycapsule.Import(obj)
			errs <- err
			errs <- pycapsule.Borrow(obj, func(dlpack.Foreign) error { return nil })
			errs <- pycapsule.BorrowTensor(obj, func(dlpack.Foreign) error { return nil })
			_, err = pycapsule.Wrap(obj)
			errs <- err
			_, err = o.DLPack(dlpack.Request{})
			errs <- err
		}()
		for i := 0; i < 5; i++ {
			if err := <-errs; !errors.Is(err, pycapsule.ErrNoGIL) || !strings.Contains(err.Error(), "ctypes.PyDLL") {
				t.Errorf("call %d without the GIL: %v", i, err)
			}
		}
		if dlpack.Outstanding() != 0 {
			t.Errorf("outstanding %d", dlpack.Outstanding())
		}
	})
}
