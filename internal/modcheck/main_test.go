package main

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A repository of two modules, the core and a bridge over a library,
// whose outside modules come from a module proxy in a folder: the checks
// pass on it as made, and each planted fault fails the check meant to
// catch it, with its message.

// proxyModules: the outside modules, each a go.mod and one package.
var proxyModules = map[string]string{
	"example.com/lib":   "package lib\n",
	"example.com/heavy": "package heavy\n",
	"example.com/extra": "package extra\n",
}

// fixtureRules: the fixture's public packages; its "heavy" list holds the
// bridge's library, which no core package may reach.
var fixtureRules = rules{
	publics: []public{
		{pkg: ""},
		{pkg: "dlb", libs: []string{"example.com/lib"}},
	},
	heavy: []string{"example.com/heavy", "example.com/lib"},
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// proxy writes a file-system module proxy (GOPROXY=file://...) serving
// each module of proxyModules at v1.0.0.
func proxy(t *testing.T, dir string) {
	t.Helper()
	for path, src := range proxyModules {
		v := filepath.Join(dir, path, "@v")
		mod := "module " + path + "\n\ngo 1.25.0\n"
		write(t, filepath.Join(v, "list"), "v1.0.0\n")
		write(t, filepath.Join(v, "v1.0.0.info"), `{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`)
		write(t, filepath.Join(v, "v1.0.0.mod"), mod)
		f, err := os.Create(filepath.Join(v, "v1.0.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		z := zip.NewWriter(f)
		for name, data := range map[string]string{"go.mod": mod, filepath.Base(path) + ".go": src} {
			w, err := z.Create(path + "@v1.0.0/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte(data)); err != nil {
				t.Fatal(err)
			}
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	coreMod = "module github.com/godlpack/dlpack\n\ngo 1.25.0\n"
	dlbMod  = "module github.com/godlpack/dlpack/dlb\n\ngo 1.25.0\n\nrequire (\n\texample.com/lib v1.0.0\n\tgithub.com/godlpack/dlpack v0.1.0\n)\n"
	goWork  = "go 1.25.0\n\nuse (\n\t.\n\t./dlb\n)\n\nreplace github.com/godlpack/dlpack v0.1.0 => .\n"
)

// fixture makes the repository, with go.sum files and the table of
// docs/modules.md as the checks write them, and returns its root.
func fixture(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	proxy(t, filepath.Join(tmp, "proxy"))
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(filepath.Join(tmp, "proxy")))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOWORK", "")
	t.Setenv("GOTOOLCHAIN", "local")
	t.Setenv("GOMODCACHE", filepath.Join(tmp, "modcache"))
	t.Cleanup(func() { // before t.TempDir's removal: the cache's files are read-only
		if out, err := exec.Command("go", "clean", "-modcache").CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache: %v\n%s", err, out)
		}
	})
	root := filepath.Join(tmp, "repo")
	write(t, filepath.Join(root, "go.work"), goWork)
	write(t, filepath.Join(root, "VERSION"), "v0.1.0\n")
	write(t, filepath.Join(root, "go.mod"), coreMod)
	write(t, filepath.Join(root, "dlpack.go"), "package dlpack\n")
	write(t, filepath.Join(root, "dlb", "go.mod"), dlbMod)
	write(t, filepath.Join(root, "dlb", "dlb.go"), "package dlb\n\nimport (\n\t_ \"example.com/lib\"\n\t_ \"github.com/godlpack/dlpack\"\n)\n")
	write(t, filepath.Join(root, docPath), "# Modules\n\n"+beginTable+"\n"+endTable+"\n\n"+beginRaises+"\n"+endRaises+"\n")
	r := load(t, root)
	if err := r.tidy(true); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, root).graph(fixtureRules, true); err != nil {
		t.Fatal(err)
	}
	return root
}

func load(t *testing.T, root string) *repo {
	t.Helper()
	r, err := loadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// plant replaces a file of the repository until the (sub)test ends.
func plant(t *testing.T, root, name string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(root, name)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(path, []byte(edit(string(old))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestChecksCatchPlantedFaults(t *testing.T) {
	root := fixture(t)
	tidy := func(r *repo) error { return r.tidy(false) }
	graph := func(r *repo) error { _, err := r.graph(fixtureRules, false); return err }
	t.Run("as made", func(t *testing.T) {
		if err := tidy(load(t, root)); err != nil {
			t.Fatal(err)
		}
		table, err := load(t, root).graph(fixtureRules, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range []string{"| `github.com/godlpack/dlpack` | `github.com/godlpack/dlpack` | 2 | 2 |",
			"| `dlb` | `github.com/godlpack/dlpack/dlb` | 4 | 4 |",
			"| `github.com/godlpack/dlpack` | 1.25.0 |  |",
			"| `github.com/godlpack/dlpack/dlb` | 1.25.0 | `example.com/lib` v1.0.0 |"} {
			if !strings.Contains(table, row) {
				t.Errorf("the table lacks %q:\n%s", row, table)
			}
		}
	})
	for _, c := range []struct {
		name, file string
		edit       func(string) string
		check      func(*repo) error
		want       string
	}{
		{"a require at another version", "dlb/go.mod",
			func(s string) string { return strings.Replace(s, "dlpack v0.1.0", "dlpack v0.0.9", 1) },
			tidy, "dlb/go.mod: require github.com/godlpack/dlpack v0.0.9: the workspace's version is v0.1.0 (VERSION)"},
		{"a replace directive", "dlb/go.mod",
			func(s string) string { return s + "\nreplace example.com/lib => example.com/lib v1.0.0\n" },
			tidy, "dlb/go.mod: replace example.com/lib: no module of this repository may carry a replace directive"},
		{"a missing require", "dlb/go.mod",
			func(s string) string { return strings.Replace(s, "\texample.com/lib v1.0.0\n", "", 1) },
			tidy, "dlb/go.mod: not tidy"},
		{"a require nothing imports", "go.mod",
			func(s string) string { return s + "\nrequire example.com/extra v1.0.0\n" },
			tidy, "/go.mod: not tidy"},
		{"a go.sum line missing", "dlb/go.sum",
			func(s string) string { return strings.SplitAfterN(s, "\n", 2)[1] },
			tidy, "dlb/go.sum: not tidy"},
		{"go.work without the core's replace", "go.work",
			func(s string) string {
				return strings.Replace(s, "replace github.com/godlpack/dlpack v0.1.0 => .\n", "", 1)
			},
			tidy, "go.work: want replace github.com/godlpack/dlpack v0.1.0"},
		{"go.work replacing at another version", "go.work",
			func(s string) string { return strings.Replace(s, "dlpack v0.1.0 =>", "dlpack v0.0.9 =>", 1) },
			tidy, "go.work: want replace github.com/godlpack/dlpack v0.1.0"},
		{"a core module that requires a heavy one", "go.mod",
			func(s string) string { return s + "\nrequire example.com/heavy v1.0.0\n" },
			graph, "github.com/godlpack/dlpack: a user's module graph holds example.com/heavy, which it does not need"},
		{"a core package that imports the bridge's library", "go.mod",
			func(s string) string { return s + "\nrequire example.com/lib v1.0.0\n" },
			graph, "github.com/godlpack/dlpack: a user's module graph holds example.com/lib"},
		{"a bridge that requires beyond its library", "dlb/go.mod",
			func(s string) string { return s + "\nrequire example.com/extra v1.0.0\n" },
			graph, "dlb: a user's module graph holds example.com/extra, which it does not need"},
		{"a stale table", docPath,
			func(s string) string { return strings.Replace(s, "| 4 | 4 |", "| 3 | 4 |", 1) },
			graph, "docs/modules.md: the module counts changed"},
		{"no table", docPath,
			func(s string) string { return strings.Replace(s, endTable, "", 1) },
			graph, "the generated table's markers are missing"},
		{"a raised go line", "dlb/go.mod",
			func(s string) string { return strings.Replace(s, "go 1.25.0", "go 1.26.0", 1) },
			graph, "the versions each module raises changed"},
		{"a stale raises table", docPath,
			func(s string) string {
				return strings.Replace(s, "`example.com/lib` v1.0.0", "`example.com/lib` v0.9.0", 1)
			},
			graph, "the versions each module raises changed"},
		{"no raises table", docPath,
			func(s string) string { return strings.Replace(s, beginRaises, "", 1) },
			graph, "the generated table's markers are missing (" + beginRaises},
	} {
		t.Run(c.name, func(t *testing.T) {
			plant(t, root, c.file, c.edit)
			err := c.check(load(t, root))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	t.Run("as made, again", func(t *testing.T) {
		if err := tidy(load(t, root)); err != nil {
			t.Fatal(err)
		}
		if err := graph(load(t, root)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFix: tidy -fix writes back what the tidy check wants.
func TestFix(t *testing.T) {
	root := fixture(t)
	mod := filepath.Join(root, "dlb", "go.mod")
	if err := os.WriteFile(mod, []byte(strings.Replace(dlbMod, "\texample.com/lib v1.0.0\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := load(t, root).tidy(false); err == nil {
		t.Fatal("an untidy go.mod passed")
	}
	if err := load(t, root).tidy(true); err != nil {
		t.Fatal(err)
	}
	if err := load(t, root).tidy(false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(mod); !strings.Contains(string(got), "example.com/lib v1.0.0") {
		t.Fatalf("go.mod after -fix:\n%s", got)
	}
}

// TestOurRules: every public package of the rules exists in this
// repository, and the heavy list names no module of it.
func TestOurRules(t *testing.T) {
	r := load(t, ".")
	for _, p := range ours.publics {
		dir := filepath.Join(r.root, filepath.FromSlash(p.pkg))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("public package %s: %v", display(p.pkg), err)
		}
	}
	for _, h := range ours.heavy {
		if strings.HasPrefix(h, core) {
			t.Errorf("heavy module %s is this repository's", h)
		}
	}
}
