//go:build cgo

package pycapsule_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
	"github.com/godlpack/dlpack/pycapsule/internal/pyembed"
)

// exchangePrelude is a Python type for Go tensors (GoT: _id names a Go
// array), its factory, and a caller of exchange tables written with
// ctypes, the way a C extension calls them (PYFUNCTYPE: the GIL is held).
const exchangePrelude = `
import ctypes

if "GoT" not in globals():  # published once: the table outlives each test
    class GoT:
        pass

    def make_got(i):
        o = GoT()
        o._id = i
        return o

class V(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]

class DLT(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]

class M(ctypes.Structure):
    _fields_ = [("version", V), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLT)]

DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(M))
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLT), ctypes.POINTER(ctypes.POINTER(M)), ctypes.c_void_p, SET_ERROR)
FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(M)))
TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(M), ctypes.POINTER(ctypes.c_void_p))
VIEW = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLT))
STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))

class API(ctypes.Structure):
    _fields_ = [("version", V), ("prev_api", ctypes.c_void_p), ("alloc", ALLOC), ("from_py", FROM_PY),
                ("to_py", TO_PY), ("view", VIEW), ("stream", STREAM)]

ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
ctypes.pythonapi.PyCapsule_New.restype = ctypes.py_object
ctypes.pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
ctypes.pythonapi.Py_DecRef.argtypes = [ctypes.c_void_p]

def table(cls):
    return API.from_address(ctypes.pythonapi.PyCapsule_GetPointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api"))

def release(m):
    DELETER(m.contents.deleter)(m)

def expect(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return str(e)
    raise AssertionError(f"{fn} did not raise {exc}")
`

// goT is the Go side of GoT: arrays by id.
var goT = struct {
	sync.Mutex
	arrays  map[int64]dlpack.Producer
	next    int64
	factory uintptr
	exch    *pycapsule.Exchange
}{arrays: map[int64]dlpack.Producer{}}

func addGoT(p dlpack.Producer) int64 {
	goT.Lock()
	defer goT.Unlock()
	goT.next++
	goT.arrays[goT.next] = p
	return goT.next
}

var gotType = pycapsule.TensorType{
	Producer: func(obj uintptr) (dlpack.Producer, error) {
		id, err := pycapsule.IntAttr(obj, "_id")
		if err != nil {
			return nil, err
		}
		if id == -7 {
			panic("a bug in the extension")
		}
		goT.Lock()
		defer goT.Unlock()
		if p := goT.arrays[id]; p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("no tensor %d", id)
	},
	New: func(f dlpack.Foreign) (uintptr, error) {
		return pycapsule.CallInt(goT.factory, addGoT(f))
	},
}

// exchangeSession loads the prelude and publishes GoT's table (once per
// process: the table lives as long as the process).
func exchangeSession(t *testing.T, p *session) {
	t.Helper()
	p.exec(exchangePrelude)
	if goT.exch == nil {
		goT.factory = pyembed.Global("make_got") // the module keeps it
		e, err := pycapsule.Publish(pyembed.Global("GoT"), gotType)
		if err != nil {
			t.Fatal(err)
		}
		goT.exch = e
	}
}

func statsDelta(before pycapsule.ExchangeStats) pycapsule.ExchangeStats {
	a := pycapsule.ReadExchangeStats()
	return pycapsule.ExchangeStats{
		FromPyObject: a.FromPyObject - before.FromPyObject, ToPyObject: a.ToPyObject - before.ToPyObject,
		DLTensorFromPyObject: a.DLTensorFromPyObject - before.DLTensorFromPyObject, Allocator: a.Allocator - before.Allocator,
		CurrentWorkStream: a.CurrentWorkStream - before.CurrentWorkStream, Failures: a.Failures - before.Failures,
		Exports: a.Exports - before.Exports, TableImports: a.TableImports - before.TableImports,
		ProtocolImports: a.ProtocolImports - before.ProtocolImports, TableViews: a.TableViews - before.TableViews,
	}
}

// The published table: what the type carries, each entry called from C
// (ctypes) on our objects and on others, and Go taking our objects back.
func TestPublishedTable(t *testing.T) {
	py(t, func(p *session) {
		exchangeSession(t, p)
		e := goT.exch
		if _, err := pycapsule.Publish(0, gotType); !errors.Is(err, pycapsule.ErrExchange) {
			t.Errorf("Publish(NULL): %v", err)
		}
		if _, err := pycapsule.Publish(pyembed.Global("GoT"), pycapsule.TensorType{}); !errors.Is(err, pycapsule.ErrExchange) {
			t.Errorf("Publish without callbacks: %v", err)
		}
		if _, err := pycapsule.Publish(p.eval("int"), gotType); !errors.Is(err, pycapsule.ErrExchange) || pyembed.Pending() {
			t.Errorf("a type that refuses the attribute: %v", err)
		}
		if _, err := pycapsule.IntAttr(0, "_id"); err == nil || pycapsule.ExchangeAPIOf(0) != nil {
			t.Error("NULL objects must be refused")
		}
		if again, err := pycapsule.Publish(pyembed.Global("GoT"), gotType); err != nil || again != e {
			t.Errorf("publishing again: %v, %v; want the same table", again, err)
		}
		if v := e.API().Header.Version; v != (dlpack.Version{Major: 1, Minor: 3}) || e.API().Header.PrevAPI != 0 {
			t.Errorf("table header: %v, prev %#x", v, e.API().Header.PrevAPI)
		}
		if pycapsule.ExchangeAPIOf(p.eval("make_got(0)")) != e.API() {
			t.Error("ExchangeAPIOf does not find the published table")
		}
		p.check(`'"dlpack_exchange_api"' in repr(GoT.__dlpack_c_exchange_api__)`)
		p.check(fmt.Sprintf("ctypes.addressof(table(GoT)) == %d", uintptr(unsafe.Pointer(e.API()))))

		data := dlpack.AlignedSlice[float32](6)
		for i := range data {
			data[i] = float32(i)
		}
		id := addGoT(dlpack.NewArray(data, []int64{2, 3}))
		p.exec(fmt.Sprintf("g = make_got(%d); api = table(GoT); out = ctypes.POINTER(M)()", id))
		s := pycapsule.ReadExchangeStats()
		p.exec("assert api.from_py(g, ctypes.byref(out)) == 0")
		p.check(fmt.Sprintf("out.contents.dl_tensor.data == %d and out.contents.flags == 0", uintptrOf(data)))
		p.check("[out.contents.dl_tensor.shape[i] for i in range(2)] == [2, 3]")
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{FromPyObject: 1, Exports: 1}) || dlpack.Outstanding() != 1 {
			t.Errorf("from_py: %+v, outstanding %d", d, dlpack.Outstanding())
		}
		p.exec("out2 = ctypes.POINTER(M)()\nassert api.from_py(g, ctypes.byref(out2)) == 0")
		p.check("out2.contents.dl_tensor.data == out.contents.dl_tensor.data and ctypes.addressof(out2.contents) != ctypes.addressof(out.contents)")
		if st := pycapsule.ReadExchangeStats(); st.Exports-s.Exports != 1 || st.LiveLent != 2 || dlpack.Outstanding() != 1 {
			t.Errorf("a second exchange of the same object: %+v, outstanding %d; want one export, two lent", st, dlpack.Outstanding())
		}
		p.exec("release(out); release(out2)")
		if st := pycapsule.ReadExchangeStats(); st.LiveLent != 0 || st.LiveExports != 1 || dlpack.Outstanding() != 1 {
			t.Errorf("lent tensors released: %+v, outstanding %d; the object still holds its export", st, dlpack.Outstanding())
		}

		// Objects not ours: TypeError, nothing handed out.
		s = pycapsule.ReadExchangeStats()
		p.check(`"not an object of the type" in expect(TypeError, api.from_py, np.arange(2.0), ctypes.byref(out))`)
		p.check(`"not an object of the type" in expect(TypeError, api.view, None, ctypes.byref(DLT()))`)
		p.exec("class Impostor:\n    __dlpack_c_exchange_api__ = GoT.__dlpack_c_exchange_api__\n    _id = 1")
		p.check(`"not an object" in expect(TypeError, api.from_py, Impostor(), ctypes.byref(out))`)
		p.check(`"no tensor" in expect(BufferError, api.from_py, make_got(10**6), ctypes.byref(out))`)
		p.check(`"_id" in expect(AttributeError, api.from_py, GoT(), ctypes.byref(out))`)
		p.check(`"panic in a TensorType function: a bug" in expect(BufferError, api.from_py, make_got(-7), ctypes.byref(out))`)
		if d := statsDelta(s); d.Failures != 6 || d.FromPyObject != 5 {
			t.Errorf("refusals: %+v", d)
		}

		// The DLTensor view: the object's export, released with the object;
		// a tensor lent before the object died keeps it alive.
		s = pycapsule.ReadExchangeStats()
		p.exec("v1, v2 = DLT(), DLT()\nassert api.view(g, ctypes.byref(v1)) == 0 and api.view(g, ctypes.byref(v2)) == 0")
		p.check(fmt.Sprintf("v1.data == %d and ctypes.addressof(v1.shape.contents) == ctypes.addressof(v2.shape.contents)", uintptrOf(data)))
		if d := statsDelta(s); d.DLTensorFromPyObject != 2 || d.Exports != 0 || dlpack.Outstanding() != 1 {
			t.Errorf("views: %+v, outstanding %d", d, dlpack.Outstanding())
		}
		p.exec("assert api.from_py(g, ctypes.byref(out)) == 0\ndel g, v1, v2; gc.collect()")
		if n := dlpack.Outstanding(); n != 1 {
			t.Errorf("a lent tensor must keep the export after its object died: outstanding %d", n)
		}
		p.exec("release(out)")
		if st := pycapsule.ReadExchangeStats(); dlpack.Outstanding() != 0 || st.LiveExports != 0 || st.LiveLent != 0 {
			t.Errorf("after the object and the last lent tensor: outstanding %d, %+v", dlpack.Outstanding(), st)
		}

		// to_py: a tensor from the allocator becomes a new GoT that owns it.
		p.exec(`shape = (ctypes.c_int64 * 1)(4)
proto = DLT(device_type=1, ndim=1, code=2, bits=64, lanes=1, shape=shape)
m = ctypes.POINTER(M)()
assert api.alloc(ctypes.byref(proto), ctypes.byref(m), None, SET_ERROR(lambda *a: None)) == 0
ptr = m.contents.dl_tensor.data
o = ctypes.c_void_p()
assert api.to_py(m, ctypes.byref(o)) == 0
h = ctypes.cast(o, ctypes.py_object).value
ctypes.pythonapi.Py_DecRef(o)
assert type(h) is GoT`)
		hid, err := pycapsule.IntAttr(pyembed.Global("h"), "_id")
		if err != nil {
			t.Fatal(err)
		}
		goT.Lock()
		f := goT.arrays[hid].(dlpack.Foreign)
		delete(goT.arrays, hid)
		goT.Unlock()
		p.check(fmt.Sprintf("ptr == %d", f.DataAddr()))
		if xs, err := dlpack.Slice[float64](f); err != nil || fmt.Sprint(xs) != "[0 0 0 0]" {
			t.Errorf("the allocated tensor in Go: %v, %v", xs, err)
		}
		f.Close()
		p.exec("del h")

		// The stream: NULL, success, for every device.
		p.exec("st = ctypes.c_void_p(1)\nassert api.stream(2, 0, ctypes.byref(st)) == 0 and st.value is None")

		// Go takes one of its own objects back Go to Go, through the table.
		p.exec(fmt.Sprintf("g = make_got(%d)", id))
		s = pycapsule.ReadExchangeStats()
		f, err = pycapsule.Import(pyembed.Global("g"))
		if err != nil {
			t.Fatal(err)
		}
		if f.DataAddr() != uintptrOf(data) || dlpack.Outstanding() != 0 {
			t.Errorf("own object: data %#x, outstanding %d (Go to Go exports nothing)", f.DataAddr(), dlpack.Outstanding())
		}
		f.Close()
		err = pycapsule.Borrow(pyembed.Global("g"), func(f dlpack.Foreign) error {
			xs, err := dlpack.Slice[float32](f)
			if err == nil && xs[5] != 5 {
				err = fmt.Errorf("values %v", xs)
			}
			return err
		})
		if d := statsDelta(s); err != nil || d != (pycapsule.ExchangeStats{TableImports: 2}) {
			t.Errorf("Import and Borrow of our own object: %v, %+v", err, d)
		}
		p.exec("del g, api, out")
	})
}

// Other libraries' tables: a usable one is used instead of __dlpack__; a
// table of another major version is skipped along prev_api; anything else
// falls back to __dlpack__; an entry's exception reaches the caller.
func TestForeignTables(t *testing.T) {
	py(t, func(p *session) {
		exchangeSession(t, p)
		p.exec(`
keep = []
def make_table(major, minor, from_py=None, prev=0):
    t = API()
    t.version = V(major, minor)
    t.prev_api = prev
    if from_py is not None:
        t.from_py = FROM_PY(from_py)
        keep.append(t.from_py)
    keep.append(t)
    return t

x = np.arange(4.0)
calls = []
def from_py(obj, out):
    calls.append(obj)
    cap = obj.x.__dlpack__(max_version=(1, 3))
    ptr = ctypes.pythonapi.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.pythonapi.PyCapsule_SetName(cap, b"used_dltensor_versioned")
    out[0] = ctypes.cast(ptr, ctypes.POINTER(M))
    return 0

def typed(name, tbl):
    cls = type(name, (), {"__dlpack__": lambda self, **kw: self.x.__dlpack__(**kw), "__init__": lambda self, x: setattr(self, "x", x)})
    if tbl is not None:
        cls.__dlpack_c_exchange_api__ = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(tbl), b"dlpack_exchange_api", None)
    return cls

good = typed("Good", make_table(1, 3, from_py))
chained = typed("Chained", make_table(2, 0, None, ctypes.addressof(make_table(1, 3, from_py))))
newer_only = typed("NewerOnly", make_table(2, 0, from_py))
older = typed("Older", make_table(1, 2, from_py))
no_entry = typed("NoEntry", make_table(1, 3))
# A copy of GoT's table is not GoT's table: its entries run (in C) and
# refuse objects of other types with a TypeError.
copy = API.from_buffer_copy(table(GoT))
keep.append(copy)
fails = typed("Fails", copy)
class WrongName:
    __dlpack_c_exchange_api__ = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(make_table(1, 3, from_py)), b"other", None)
    def __init__(self, x): self.x = x
    def __dlpack__(self, **kw): return self.x.__dlpack__(**kw)
`)
		for _, c := range []struct {
			cls   string
			table bool
		}{{"good", true}, {"chained", true}, {"newer_only", false}, {"older", false}, {"no_entry", false}, {"WrongName", false}} {
			obj := p.eval(c.cls + "(x)")
			s := pycapsule.ReadExchangeStats()
			f, err := pycapsule.Import(obj)
			if err != nil {
				t.Errorf("%s: %v", c.cls, err)
				continue
			}
			xs, err := dlpack.Slice[float64](f)
			if err != nil || fmt.Sprint(xs) != "[0 1 2 3]" {
				t.Errorf("%s: %v %v", c.cls, xs, err)
			}
			p.check("x.ctypes.data == " + fmt.Sprint(f.DataAddr()))
			f.Close()
			want := pycapsule.ExchangeStats{ProtocolImports: 1}
			if c.table {
				want = pycapsule.ExchangeStats{TableImports: 1}
			}
			if d := statsDelta(s); d != want {
				t.Errorf("%s: %+v, want %+v", c.cls, d, want)
			}
		}
		p.check("len(calls) == 2")

		_, err := pycapsule.Import(p.eval("fails(x)"))
		if !errors.Is(err, pycapsule.ErrPython) || !strings.Contains(err.Error(), "not an object of the type") {
			t.Errorf("a failing entry: %v", err)
		} else if e := raised(t); !strings.HasPrefix(e, "TypeError") {
			t.Errorf("pending: %s", e)
		}
		p.exec("del keep, good, chained, newer_only, older, no_entry, fails, WrongName; gc.collect()")
	})
}

// tvm-ffi, as a peer written elsewhere: its tensors come into Go through
// its own table (DLTensorTestWrapper publishes one), and Go tensors go
// into tvm-ffi through ours.
func TestTVMFFI(t *testing.T) {
	py(t, func(p *session) {
		exchangeSession(t, p)
		p.exec(`import tvm_ffi
from tvm_ffi import core as tvm_core
use_count = tvm_ffi.get_global_func("testing.object_use_count")
src = np.arange(6.0)
tx = tvm_ffi.from_dlpack(src)
w = tvm_core.DLTensorTestWrapper(tx)
uses = use_count(tx)`)
		s := pycapsule.ReadExchangeStats()
		f, err := pycapsule.Import(pyembed.Global("w"))
		if err != nil {
			t.Fatal(err)
		}
		p.check("use_count(tx) == uses + 1")
		p.check("src.ctypes.data == " + fmt.Sprint(f.DataAddr()))
		f.Close()
		p.check("use_count(tx) == uses")
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{TableImports: 1}) {
			t.Errorf("tvm-ffi's tensor: %+v", d)
		}

		// tvm-ffi's table has no dltensor_from_py_object_no_sync:
		// BorrowTensor takes the managed entry, as Borrow does.
		s = pycapsule.ReadExchangeStats()
		if err := pycapsule.BorrowTensor(pyembed.Global("w"), func(dlpack.Foreign) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{TableImports: 1}) {
			t.Errorf("tvm-ffi's tensor through BorrowTensor: %+v", d)
		}
		p.check("use_count(tx) == uses")

		data := dlpack.AlignedSlice[float64](4)
		id := addGoT(dlpack.NewArray(data, []int64{4}))
		s = pycapsule.ReadExchangeStats()
		p.exec(fmt.Sprintf("y = tvm_ffi.from_dlpack(make_got(%d))", id))
		p.check(fmt.Sprintf("y.data_ptr() == %d and y.shape == (4,)", uintptrOf(data)))
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{FromPyObject: 1, Exports: 1}) || dlpack.Outstanding() != 1 {
			t.Errorf("into tvm-ffi: %+v, outstanding %d", d, dlpack.Outstanding())
		}
		p.exec("del y, w, tx; gc.collect()")
		if n := dlpack.Outstanding(); n != 0 {
			t.Errorf("outstanding %d after tvm-ffi let go", n)
		}
	})
}

// BorrowTensor through a table's dltensor_from_py_object_no_sync: a
// subclass of GoT carrying a copy of GoT's table (so not this library's
// own table: its C entries run) lends a DLTensor that Go views in place,
// read-only unless AssumeWritable; objects without the entry fall back to
// Borrow.
func TestBorrowTensorThroughTable(t *testing.T) {
	py(t, func(p *session) {
		exchangeSession(t, p)
		data := dlpack.AlignedSlice[float32](6)
		for i := range data {
			data[i] = float32(i)
		}
		id := addGoT(dlpack.NewArray(data, []int64{2, 3}))
		p.exec(fmt.Sprintf(`
copied = API.from_buffer_copy(table(GoT))
class Viewed(GoT):
    __dlpack_c_exchange_api__ = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(copied), b"dlpack_exchange_api", None)
v = make_got(%d)
v.__class__ = Viewed
src = np.arange(3.0)`, id))
		s := pycapsule.ReadExchangeStats()
		for _, writable := range []bool{false, true} {
			var opts []dlpack.ImportOption
			if writable {
				opts = append(opts, dlpack.AssumeWritable())
			}
			err := pycapsule.BorrowTensor(pyembed.Global("v"), func(f dlpack.Foreign) error {
				if f.DataAddr() != uintptrOf(data) || fmt.Sprint(f.Shape()) != "[2 3]" {
					t.Errorf("viewed: %#x %v, want %#x [2 3]", f.DataAddr(), f.Shape(), uintptrOf(data))
				}
				xs, err := dlpack.Slice[float32](f)
				if !writable {
					if !errors.Is(err, dlpack.ErrReadOnly) {
						t.Errorf("a DLTensor view without AssumeWritable: %v", err)
					}
					return nil
				}
				if err != nil || fmt.Sprint(xs) != "[0 1 2 3 4 5]" {
					t.Errorf("viewed: %v %v", xs, err)
				}
				return nil
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
		}
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{DLTensorFromPyObject: 2, Exports: 1, TableViews: 2}) {
			t.Errorf("through the table: %+v", d)
		}
		s = pycapsule.ReadExchangeStats()
		if err := pycapsule.BorrowTensor(pyembed.Global("src"), func(dlpack.Foreign) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if d := statsDelta(s); d != (pycapsule.ExchangeStats{ProtocolImports: 1}) {
			t.Errorf("NumPy's array through BorrowTensor: %+v", d)
		}
		p.exec("del v, Viewed, copied, src; gc.collect()")
		if n := dlpack.Outstanding(); n != 0 {
			t.Errorf("outstanding %d", n)
		}
	})
}
