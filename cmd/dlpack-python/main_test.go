package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWritesAndChecks(t *testing.T) {
	dir := t.TempDir()
	if err := run("demo", "main", dir, true); err == nil {
		t.Fatal("-check passed without the files")
	}
	if err := run("demo", "main", dir, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"demo_dlpack.go", "demo.py"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"demo_dlpack", "demo_from_dlpack", "demo_free"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: no %s", f, want)
			}
		}
	}
	if err := run("demo", "main", dir, true); err != nil {
		t.Fatalf("-check of fresh files: %v", err)
	}
	py := filepath.Join(dir, "demo.py")
	if err := os.WriteFile(py, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("demo", "main", dir, true); err == nil {
		t.Fatal("-check passed an edited loader")
	}
	for _, bad := range []string{"", "Demo", "1x", "my-lib", "a b"} {
		if err := run(bad, "main", dir, false); err == nil || !strings.Contains(err.Error(), "-name") {
			t.Errorf("-name %q: %v", bad, err)
		}
	}
}

// demoMain is a user's c-shared library: its own //export functions
// register producers for Python and read what Python hands over.
const demoMain = `package main

//go:generate go tool dlpack-python -name demo

// #include <stdint.h>
import "C"

import "github.com/godlpack/dlpack"

//export demo_arange
func demo_arange(n C.int64_t) C.int64_t {
	xs := dlpack.AlignedSlice[float64](int(n))
	for i := range xs {
		xs[i] = float64(i)
	}
	return C.int64_t(demoRegister(dlpack.NewArray(xs, []int64{int64(n)})))
}

//export demo_sum
func demo_sum(id C.int64_t) C.double {
	f, err := dlpack.From(demoLookup(int64(id)))
	if err != nil {
		return -1
	}
	defer f.Close()
	xs, err := dlpack.ReadOnlySlice[float64](f)
	if err != nil {
		return -1
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return C.double(s)
}

func main() {}
`

const demoPy = `
import ctypes, gc, os, sys
import numpy as np
import demo

t = demo.tensor(demo.lib.demo_arange, 5)
a = np.from_dlpack(t)
assert (a == np.arange(5.0)).all(), a
x = np.arange(4.0)
g = demo.from_dlpack(x)
demo.lib.demo_sum.restype = ctypes.c_double
demo.lib.demo_sum.argtypes = [ctypes.c_int64]
assert demo.lib.demo_sum(g._id) == 6.0
y = np.from_dlpack(g)
assert y.ctypes.data == x.ctypes.data, "Go handed NumPy's memory back without a copy"

# Loaded with ctypes.CDLL, which releases the GIL around each call, the
# entry points touch nothing and refuse: CPython raises a SystemError
# ("returned a result with an exception set") whose cause is pycapsule's
# RuntimeError, as docs/python.md says.
c = ctypes.CDLL(os.environ["DEMO_LIB"])
c.demo_dlpack.restype = ctypes.py_object
c.demo_dlpack.argtypes = [ctypes.c_int64, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object]
c.demo_dlpack_device.restype = ctypes.py_object
c.demo_dlpack_device.argtypes = [ctypes.c_int64]
for call in (lambda: c.demo_dlpack(t._id, None, None, None, None), lambda: c.demo_dlpack_device(t._id)):
    try:
        call()
        raise AssertionError("no error without the GIL")
    except SystemError as e:
        assert "returned a result with an exception set" in str(e), repr(e)
        assert type(e.__cause__) is RuntimeError and "ctypes.PyDLL" in str(e.__cause__), repr(e.__cause__)
        print("ctypes.CDLL:", repr(e), "from", repr(e.__cause__))

del a, y
t.close(); g.close()
gc.collect()
assert demo.live() == 0 and demo.outstanding() == 0, (demo.live(), demo.outstanding())
print("round trip: ok")
`

// TestFreshModuleRoundTrip builds a library the way docs/python.md does:
// an empty module outside this repository that depends on the library
// by the README's lines (its first sh block under "Depending on it", run
// as written but for the checkout's path), the tool line, then the code,
// go generate, go build -buildmode=c-shared; then Python with NumPy
// (GODLPACK_PYTHON, which make python sets) loads it through the
// generated loader, both ways, and through ctypes.CDLL, refused.
func TestFreshModuleRoundTrip(t *testing.T) {
	py := os.Getenv("GODLPACK_PYTHON")
	if py == "" {
		t.Skip("GODLPACK_PYTHON is not set (make python sets it)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := readmeDepending(t, string(readme))
	if v := strings.TrimSpace(string(version)); !strings.Contains(strings.Join(lines, "\n"), "@"+v) {
		t.Fatalf("the README's lines do not name VERSION %s:\n%s", v, strings.Join(lines, "\n"))
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libdemo.so")
	steps := [][]string{{"go", "mod", "init", "example.com/demo"}}
	for _, l := range lines {
		steps = append(steps, strings.Fields(strings.ReplaceAll(l, "=../dlpack", "="+root)))
	}
	steps = append(steps,
		[]string{"go", "mod", "edit", "-tool=github.com/godlpack/dlpack/cmd/dlpack-python"},
		nil, // the code
		[]string{"go", "generate"},
		[]string{"go", "build", "-buildmode=c-shared", "-o", lib, "."},
		[]string{py, "check.py"})
	for _, args := range steps {
		if args == nil {
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(demoMain), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "check.py"), []byte(demoPy), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "DEMO_LIB="+lib, "PYTHONPATH="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == py {
			t.Logf("%s", out)
		}
	}
}

// readmeDepending: the lines of the first sh block under the README's
// "## Depending on it".
func readmeDepending(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Depending on it\n")
	if ok {
		section, _, _ = strings.Cut(section, "\n## ")
		_, section, ok = strings.Cut(section, "```sh\n")
	}
	if ok {
		section, _, ok = strings.Cut(section, "\n```")
	}
	if !ok || strings.TrimSpace(section) == "" {
		t.Fatal("README.md: no sh block under \"## Depending on it\"")
	}
	return strings.Split(strings.TrimSpace(section), "\n")
}
