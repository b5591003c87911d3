//go:build cgo

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The library and its Python helpers agree: every function a helper calls
// through ctypes is exported here (a missing one fails only when Python
// runs, which plain go test does not), every exported function is called
// by some helper, and each file's exports carry its bridge's prefix
// (main.go: pybridges_). The helpers are the .py files of the repository
// that load this library.
func TestHelpersCallWhatIsExported(t *testing.T) {
	prefixes := map[string]string{
		"main.go": "pybridges_", "image.go": "dlimage_", "arrow.go": "dlarrow_",
		"tensorfile.go": "tensorfile_", "onnx.go": "dlonnx_", "gomlx.go": "dlgomlx_",
	}
	exported := map[string]bool{}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	exportRE := regexp.MustCompile(`(?m)^//export (\w+)$`)
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		prefix, ok := prefixes[name]
		if !ok {
			t.Errorf("%s: a bridge file not listed in this test (add its prefix)", name)
		}
		for _, m := range exportRE.FindAllStringSubmatch(string(src), -1) {
			if ok && !strings.HasPrefix(m[1], prefix) {
				t.Errorf("%s exports %s, not named %s*", name, m[1], prefix)
			}
			exported[m[1]] = true
		}
	}
	if len(exported) == 0 {
		t.Fatal("no //export lines found")
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	callRE := regexp.MustCompile(`\b_?lib\.([a-z]\w*_\w+)`)
	called := map[string][]string{}
	var helpers []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".py") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(src), "libpybridges") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		helpers = append(helpers, rel)
		for _, m := range callRE.FindAllStringSubmatch(string(src), -1) {
			called[m[1]] = append(called[m[1]], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(helpers)
	for _, want := range []string{"examples/png/goimage.py", "dlarrow/python/godlarrow.py",
		"tensorfile/testdata/share.py", "examples/onnx/goort.py", "dlgomlx/testdata/mlp.py"} {
		if !slices.Contains(helpers, want) {
			t.Errorf("helper %s not found among %v", want, helpers)
		}
	}
	for name, where := range called {
		if !exported[name] {
			t.Errorf("%v call %s, which the library does not export", slices.Compact(where), name)
		}
	}
	for name := range exported {
		if called[name] == nil {
			t.Errorf("%s is exported but no helper calls it", name)
		}
	}
	t.Logf("%d functions exported, all called by the %d Python files that load the library", len(exported), len(helpers))
}
