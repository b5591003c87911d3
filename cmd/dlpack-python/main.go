// Command dlpack-python writes the two halves of a Python module for a Go
// library built with -buildmode=c-shared: the Go side (a file of //export
// functions over package pycapsule, in package main) and the Python
// loader that goes with it. Meant for go generate, in the library's main
// package:
//
//	//go:generate go tool dlpack-python -name mylib
//
// writes mylib_dlpack.go and mylib.py. The Go file keeps the producers
// Python holds by id (mylibRegister(p) returns the id, mylibLookup finds
// it) and exports mylib_init, mylib_dlpack, mylib_dlpack_device,
// mylib_from_dlpack, mylib_free, mylib_live and mylib_outstanding. The
// loader opens libmylib.so (next to mylib.py, or $MYLIB_LIB) with
// ctypes.PyDLL, so that every call holds the GIL as pycapsule requires
// (loaded with ctypes.CDLL, its __dlpack__ raises a SystemError whose
// cause is pycapsule's RuntimeError, ErrNoGIL), and
// defines GoTensor (__dlpack__, __dlpack_device__, from_dlpack, close),
// from_dlpack, tensor (wraps what an //export function of the library
// returns: the id of a registered producer), live and outstanding. The
// library's own functions are lib.<name>.
//
// Files are written only when their content differs. With -check nothing
// is written: the command fails if a file is missing or differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

func main() {
	name := flag.String("name", "", "the library's name: a Python module name and a C identifier (required)")
	dir := flag.String("o", ".", "directory to write NAME_dlpack.go and NAME.py into")
	pkg := flag.String("package", "main", "package of the Go file (a c-shared library's is main)")
	check := flag.Bool("check", false, "write nothing; fail unless both files are current")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: dlpack-python -name NAME [-o dir] [-package main] [-check]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || *name == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*name, *pkg, *dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "dlpack-python:", err)
		os.Exit(1)
	}
}

var identifier = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// run writes (or, with check, compares) dir/NAME_dlpack.go and dir/NAME.py.
func run(name, pkg, dir string, check bool) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("-name %q: must be lower case letters, digits and _, starting with a letter (a Python module and C identifier)", name)
	}
	if !identifier.MatchString(pkg) {
		return fmt.Errorf("-package %q: not a Go package name", pkg)
	}
	files, err := render(name, pkg)
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		have, err := os.ReadFile(path)
		switch {
		case err == nil && bytes.Equal(have, f.data):
			continue
		case check && err != nil:
			return err
		case check:
			return fmt.Errorf("%s differs from what dlpack-python -name %s writes; run go generate", path, name)
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

type file struct {
	name string
	data []byte
}

// render returns the two files for the library name.
func render(name, pkg string) ([]file, error) {
	v := struct{ Name, Upper, Package string }{name, strings.ToUpper(name), pkg}
	var out []file
	for _, t := range []struct{ name, text string }{{name + "_dlpack.go", goFile}, {name + ".py", pyFile}} {
		var b bytes.Buffer
		if err := template.Must(template.New(t.name).Parse(t.text)).Execute(&b, v); err != nil {
			return nil, err
		}
		out = append(out, file{t.name, b.Bytes()})
	}
	return out, nil
}
