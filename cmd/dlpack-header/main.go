// Command dlpack-header writes dlpack.h, the DLPack 1.3 C header of package
// github.com/godlpack/dlpack, into a directory, so that the C code of
// another Go package can include it as "dlpack.h" and stay in step with the
// version of the library the module requires. Meant for go generate:
//
//	//go:generate go run github.com/godlpack/dlpack/cmd/dlpack-header -o .
//
// or, with the command recorded as a tool of the module (go get -tool
// github.com/godlpack/dlpack/cmd/dlpack-header), which also vendors it:
//
//	//go:generate go tool dlpack-header -o .
//
// The file is written only when its content differs, so a generate run
// leaves an up-to-date copy (and its timestamp) alone. With -check nothing
// is written: the command fails if the copy is missing or differs, which
// is what a CI step wants.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	dlpackh "github.com/godlpack/dlpack/include/dlpack"
)

func main() {
	dir := flag.String("o", ".", "directory to write dlpack.h into")
	check := flag.Bool("check", false, "write nothing; fail unless the directory's dlpack.h is current")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: dlpack-header [-o dir] [-check]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "dlpack-header:", err)
		os.Exit(1)
	}
}

// run writes (or, with check, compares) dir/dlpack.h.
func run(dir string, check bool) error {
	path := filepath.Join(dir, "dlpack.h")
	want := dlpackh.Header()
	have, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(have, want):
		return nil
	case check && err != nil:
		return err
	case check:
		return fmt.Errorf("%s differs from the header of github.com/godlpack/dlpack; run go generate", path)
	}
	return os.WriteFile(path, want, 0o644)
}
