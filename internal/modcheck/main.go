// Command modcheck keeps the repository's modules honest (docs/modules.md).
//
//	go run ./internal/modcheck tidy [-fix]    every module tidy, no drift between them
//	go run ./internal/modcheck graph [-update] what a user of each public package downloads
//
// tidy: for every module of go.work, `go mod tidy` would change neither
// go.mod nor go.sum; a module that requires another module of this
// repository requires it at the version in VERSION, never another; and
// no go.mod carries a replace directive (they would break `go install
// ...@version` and mean nothing to users). The tidy runs on a copy of
// go.mod that replaces this repository's modules by their folders, as
// go.work does, so that it needs no published version. With -fix the
// tidied files are written back.
//
// graph: for each public package, a throw-away module whose only code
// imports that package (a command: the command's own module), tidied
// outside the workspace; its `go list -m all` must hold nothing the
// package does not need. A core package may reach no module of the
// heavy list below; a bridge may reach the core's modules, its own
// library's (a second throw-away module that imports only the library,
// tidied, at the bridge's versions) and the repository modules it
// requires. The module counts go into
// docs/modules.md between the generated markers; without -update the
// table there must be current.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// A public package and what its users may download.
type public struct {
	pkg  string   // import path below the core module ("" is the root)
	cmd  bool     // a command: its graph is its own module's
	libs []string // the bridge's library packages; nil for a core package
}

const core = "github.com/godlpack/dlpack"

// rules: the public packages of a repository and what their graphs may hold.
type rules struct {
	publics  []public
	heavy    []string // modules no core package may pull into a user's build
	testOnly []string // modules that tests of the repository use, and no package
}

// ours: this repository's rules.
var ours = rules{publics: publics, heavy: heavy, testOnly: testOnly}

var publics = []public{
	{pkg: ""},
	{pkg: "minifloat"},
	{pkg: "include/dlpack"},
	{pkg: "tensorfile"},
	{pkg: "dlimage"},
	{pkg: "pycapsule"},
	{pkg: "cmd/dlpack-header", cmd: true},
	{pkg: "cmd/dlpack-python", cmd: true},
	{pkg: "dlgonum", libs: []string{"gonum.org/v1/gonum/mat"}},
	{pkg: "dlarrow", libs: []string{"github.com/apache/arrow-go/v18/arrow/ipc"}},
	{pkg: "dlflight", libs: []string{"github.com/apache/arrow-go/v18/arrow/flight", "google.golang.org/grpc"}},
	{pkg: "dlonnx", libs: []string{"github.com/yalue/onnxruntime_go"}},
	{pkg: "dlgrpc", libs: []string{"google.golang.org/grpc", "google.golang.org/protobuf/proto"}},
	{pkg: "dlgomlx", libs: []string{"github.com/gomlx/gomlx/backends", "github.com/gomlx/gomlx/pkg/core/tensors"}},
	{pkg: "dloip", libs: []string{"google.golang.org/grpc", "google.golang.org/protobuf/proto"}},
	{pkg: "dloip/oiponnx", libs: []string{"google.golang.org/grpc", "github.com/yalue/onnxruntime_go"}},
	{pkg: "cmd/tensorfile", cmd: true, libs: []string{
		"github.com/apache/arrow-go/v18/arrow/ipc", "github.com/schollz/progressbar/v3", "golang.org/x/term"}},
}

// heavy: modules no core package may pull into a user's build.
var heavy = []string{
	"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto",
	"github.com/apache/arrow-go", "github.com/gomlx", "github.com/yalue/onnxruntime_go",
	"gonum.org/v1/gonum", "github.com/schollz/progressbar",
}

// testOnly: modules that tests of the repository use, and no package.
var testOnly = []string{"github.com/stretchr/testify", "github.com/x448/float16"}

// raisedShown: indirect requirements named in docs/modules.md's table of
// what each module raises, beside its direct ones: modules that many
// programs require themselves.
var raisedShown = []string{"golang.org/x/sys", "golang.org/x/net", "google.golang.org/grpc", "google.golang.org/protobuf"}

const (
	docPath     = "docs/modules.md"
	beginTable  = "<!-- modcheck graph: begin (go run ./internal/modcheck graph -update) -->"
	endTable    = "<!-- modcheck graph: end -->"
	beginRaises = "<!-- modcheck raises: begin (go run ./internal/modcheck graph -update) -->"
	endRaises   = "<!-- modcheck raises: end -->"
)

// workFile is go.work as `go work edit -json` prints it.
type workFile struct {
	Use     []struct{ DiskPath string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path string }
	}
}

type module struct {
	dir, path string
	goVersion string            // its go line
	requires  map[string]string // path -> version
	indirect  map[string]bool   // the requirements marked // indirect
	replaces  []string
}

// repo: a repository's workspace, its modules and its VERSION.
type repo struct {
	root, version string
	work          workFile
	mods          []module
}

func main() {
	if len(os.Args) < 2 {
		fatalf("usage: modcheck tidy [-fix] | graph [-update]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fix := fs.Bool("fix", false, "write the tidied go.mod and go.sum back")
	update := fs.Bool("update", false, "rewrite the table in "+docPath)
	fs.Parse(os.Args[2:])
	r, err := loadRepo(".")
	if err != nil {
		fatalf("%v", err)
	}
	switch os.Args[1] {
	case "tidy":
		err = r.tidy(*fix)
	case "graph":
		var table string
		if table, err = r.graph(ours, *update); err == nil {
			fmt.Println(table)
		}
	default:
		err = fmt.Errorf("unknown verb %q", os.Args[1])
	}
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "modcheck: "+format+"\n", a...)
	os.Exit(1)
}

// loadRepo reads go.work (the one the go command uses in dir), every
// module it lists and VERSION at its root.
func loadRepo(dir string) (*repo, error) {
	cmd := exec.Command("go", "env", "GOWORK")
	cmd.Dir = dir
	out, err := cmd.Output()
	if gowork := strings.TrimSpace(string(out)); err != nil || gowork == "" || gowork == "off" {
		return nil, fmt.Errorf("no go.work in use (GOWORK=%q): run from the repository", gowork)
	}
	r := &repo{root: filepath.Dir(strings.TrimSpace(string(out)))}
	v, err := os.ReadFile(filepath.Join(r.root, "VERSION"))
	if err != nil {
		return nil, err
	}
	r.version = strings.TrimSpace(string(v))
	if err := readJSON(r.root, &r.work, "go", "work", "edit", "-json"); err != nil {
		return nil, err
	}
	for _, u := range r.work.Use {
		dir := filepath.Join(r.root, u.DiskPath)
		var mf struct {
			Module  struct{ Path string }
			Go      string
			Require []struct {
				Path, Version string
				Indirect      bool
			}
			Replace []struct{ Old struct{ Path string } }
		}
		if err := readJSON(dir, &mf, "go", "mod", "edit", "-json"); err != nil {
			return nil, err
		}
		m := module{dir: dir, path: mf.Module.Path, goVersion: mf.Go, requires: map[string]string{}, indirect: map[string]bool{}}
		for _, r := range mf.Require {
			m.requires[r.Path] = r.Version
			m.indirect[r.Path] = r.Indirect
		}
		for _, r := range mf.Replace {
			m.replaces = append(m.replaces, r.Old.Path)
		}
		r.mods = append(r.mods, m)
	}
	return r, nil
}

func readJSON(dir string, v any, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s in %s: %v", name, strings.Join(args, " "), dir, stderr(err))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s %s in %s: %v", name, strings.Join(args, " "), dir, err)
	}
	return nil
}

func stderr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

// run runs the go command outside the workspace, in dir.
func run(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), dir, stderr(err))
	}
	return out, nil
}

// replaceAll: edit flags that point every module of the repository at its folder.
func replaceAll(mods []module) []string {
	var flags []string
	for _, m := range mods {
		flags = append(flags, "-replace="+m.path+"="+m.dir)
	}
	return flags
}

// tidy: every module tidy, none requiring another at a version but
// VERSION, go.work replacing each required one, no replace directives;
// with fix, the tidied go.mod and go.sum are written back instead.
func (rp *repo) tidy(fix bool) error {
	root, mods, version := rp.root, rp.mods, rp.version
	var problems []string
	paths := map[string]bool{}
	for _, m := range mods {
		paths[m.path] = true
	}
	required := map[string]bool{}
	for _, m := range mods {
		for p := range m.requires {
			if paths[p] {
				required[p] = true
			}
		}
	}
	for _, m := range mods {
		if !required[m.path] {
			continue
		}
		ok := false
		for _, r := range rp.work.Replace {
			if r.Old.Path == m.path && r.Old.Version == version && filepath.Join(root, r.New.Path) == m.dir {
				ok = true
			}
		}
		if !ok {
			rel, _ := filepath.Rel(root, m.dir)
			problems = append(problems, fmt.Sprintf("go.work: want replace %s %s => ./%s (other modules require it)", m.path, version, rel))
		}
	}
	for _, m := range mods {
		rel, _ := filepath.Rel(root, m.dir)
		for _, r := range m.replaces {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s: no module of this repository may carry a replace directive (go.work stands in for them)", rel, r))
		}
		for p, v := range m.requires {
			if paths[p] && v != version {
				problems = append(problems, fmt.Sprintf("%s/go.mod: require %s %s: the workspace's version is %s (VERSION)", rel, p, v, version))
			}
		}
		tmp, err := os.MkdirTemp("", "modcheck-tidy")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		modfile, sumfile := filepath.Join(tmp, "go.mod"), filepath.Join(tmp, "go.sum")
		mod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
		if err != nil {
			return err
		}
		sum, err := os.ReadFile(filepath.Join(m.dir, "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(modfile, mod, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(sumfile, sum, 0o644); err != nil {
			return err
		}
		var others []module
		for _, o := range mods {
			if o.path != m.path {
				others = append(others, o)
			}
		}
		if _, err := run(m.dir, append([]string{"mod", "edit"}, append(replaceAll(others), modfile)...)...); err != nil {
			return err
		}
		if _, err := run(m.dir, "mod", "tidy", "-modfile="+modfile); err != nil {
			return err
		}
		var drop []string
		for _, o := range others {
			drop = append(drop, "-dropreplace="+o.path)
		}
		if _, err := run(m.dir, append([]string{"mod", "edit"}, append(drop, modfile)...)...); err != nil {
			return err
		}
		newMod, _ := os.ReadFile(modfile)
		newSum, _ := os.ReadFile(sumfile)
		if fix {
			if err := os.WriteFile(filepath.Join(m.dir, "go.mod"), newMod, 0o644); err != nil {
				return err
			}
			if len(newSum) > 0 || sum != nil {
				if err := os.WriteFile(filepath.Join(m.dir, "go.sum"), newSum, 0o644); err != nil {
					return err
				}
			}
			continue
		}
		if !bytes.Equal(newMod, mod) {
			problems = append(problems, fmt.Sprintf("%s/go.mod: not tidy; go mod tidy would write:\n%s", rel, newMod))
		}
		if !bytes.Equal(newSum, sum) {
			problems = append(problems, fmt.Sprintf("%s/go.sum: not tidy (go run ./internal/modcheck tidy -fix)", rel))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	fmt.Printf("modcheck: %d modules tidy, each requiring this repository's modules at %s\n", len(mods), version)
	return nil
}

// probe makes a throw-away module requiring reqs (path -> version),
// replacing the repository's modules by their folders, whose main
// package imports imports; it returns `go list -m all` after a tidy.
func probe(mods []module, reqs map[string]string, imports []string, tidy bool) (all, built []string, err error) {
	tmp, err := os.MkdirTemp("", "modcheck-probe")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(tmp, "main.go"), []byte(src.String()), 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module example.com/probe\n\ngo 1.25.0\n"), 0o644); err != nil {
		return nil, nil, err
	}
	args := []string{"mod", "edit"}
	for p, v := range reqs {
		args = append(args, "-require="+p+"@"+v)
	}
	if _, err := run(tmp, append(args, replaceAll(mods)...)...); err != nil {
		return nil, nil, err
	}
	if tidy {
		if _, err := run(tmp, "mod", "tidy"); err != nil {
			return nil, nil, err
		}
	}
	if all, err = listAll(tmp, ""); err != nil {
		return nil, nil, err
	}
	built, err = listBuilt(tmp, "")
	return all, built, err
}

// listBuilt: the modules that provide a package of the build of the
// packages in dir (with modfile, if set), the main module included.
func listBuilt(dir, modfile string) ([]string, error) {
	args := []string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}
	if modfile != "" {
		args = append(args, "-modfile="+modfile)
	}
	out, err := run(dir, append(args, ".")...)
	if err != nil {
		return nil, err
	}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	return mods, nil
}

// listAll: the module paths of `go list -m all` in dir (with modfile, if set).
func listAll(dir, modfile string) ([]string, error) {
	args := []string{"list", "-m", "-f", "{{.Path}}"}
	if modfile != "" {
		args = append(args, "-modfile="+modfile)
	}
	out, err := run(dir, append(args, "all")...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// cmdGraph: the graph `go install` of a command sees: its own module's,
// outside the workspace, with the repository's other modules replaced by
// their folders on a copy of its go.mod.
func cmdGraph(mods []module, m module, path string) (all, built []string, err error) {
	tmp, err := os.MkdirTemp("", "modcheck-cmd")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	modfile := filepath.Join(tmp, "go.mod")
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(m.dir, f))
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return nil, nil, err
		}
	}
	var others []module
	for _, o := range mods {
		if o.path != m.path {
			others = append(others, o)
		}
	}
	if _, err := run(m.dir, append([]string{"mod", "edit"}, append(replaceAll(others), modfile)...)...); err != nil {
		return nil, nil, err
	}
	if all, err = listAll(m.dir, modfile); err != nil {
		return nil, nil, err
	}
	built, err = listBuilt(filepath.Join(m.dir, strings.TrimPrefix(strings.TrimPrefix(path, m.path), "/")), modfile)
	return all, built, err
}

func owner(mods []module, pkg string) module {
	best := module{}
	for _, m := range mods {
		if (pkg == m.path || strings.HasPrefix(pkg, m.path+"/")) && len(m.path) > len(best.path) {
			best = m
		}
	}
	return best
}

// graph: the module graph of a user of each public package, checked
// against rl; it returns the table of docs/modules.md, which it writes
// there with update and otherwise requires to be current.
func (rp *repo) graph(rl rules, update bool) (string, error) {
	root, mods, version := rp.root, rp.mods, rp.version
	var problems []string
	var rows, raises []string
	var coreGraph []string
	for _, p := range rl.publics {
		path := core
		if p.pkg != "" {
			path += "/" + p.pkg
		}
		m := owner(mods, path)
		var got, built []string
		var err error
		if p.cmd {
			got, built, err = cmdGraph(mods, m, path)
		} else {
			got, built, err = probe(mods, map[string]string{m.path: version}, []string{path}, true)
		}
		if err != nil {
			return "", err
		}
		if p.pkg == "" {
			coreGraph = got
		}
		var bad []string
		if p.libs == nil {
			for _, g := range got {
				for _, h := range rl.heavy {
					if g == h || strings.HasPrefix(g, h+"/") {
						bad = append(bad, g)
					}
				}
			}
		} else {
			// The library's tree at the versions the bridge requires.
			// First the modules a tidied module that imports only the
			// library holds, from the bridge's requirements (but this
			// repository's modules and what only its tests use): a
			// requirement outside them, which only the bridge's own
			// code or nothing imports, drops out there. Then those of
			// the bridge's requirements among them, at the bridge's
			// versions, untidied (a tidy would lower versions the
			// bridge's own requirements raise).
			reqs := map[string]string{}
			for r, v := range m.requires {
				if owner(mods, r).path == "" && !slices.Contains(rl.testOnly, r) {
					reqs[r] = v
				}
			}
			tidied, _, err := probe(mods, reqs, p.libs, true)
			if err != nil {
				return "", err
			}
			for r := range reqs {
				if !slices.Contains(tidied, r) {
					delete(reqs, r)
				}
			}
			lib, _, err := probe(mods, reqs, p.libs, false)
			if err != nil {
				return "", err
			}
			allowed := map[string]bool{"example.com/probe": true, m.path: true}
			for _, l := range slices.Concat(lib, coreGraph) {
				allowed[l] = true
			}
			for r := range m.requires {
				if owner(mods, r).path != "" {
					allowed[r] = true
				}
			}
			for _, g := range got {
				if !allowed[g] {
					bad = append(bad, g)
				}
			}
		}
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("%s: a user's module graph holds %s, which it does not need", display(p.pkg), strings.Join(bad, ", ")))
		}
		rows = append(rows, fmt.Sprintf("| `%s` | `%s` | %d | %d |", display(p.pkg), m.path, len(got), len(built)))
		if row := raisesRow(mods, m); !slices.Contains(raises, row) {
			raises = append(raises, row)
		}
	}
	table := beginTable + "\n| package | its module | modules in a user's graph (`go list -m all`) | modules whose code is built |\n|---|---|---|---|\n" +
		strings.Join(rows, "\n") + "\n" + endTable
	raisesTable := beginRaises + "\n| module | `go` line | requires, so a user's graph gets at least |\n|---|---|---|\n" +
		strings.Join(raises, "\n") + "\n" + endRaises
	doc, err := os.ReadFile(filepath.Join(root, docPath))
	if err != nil {
		return "", err
	}
	counted, err := replaceBetween(doc, beginTable, endTable, table)
	if err != nil {
		return "", err
	}
	newDoc, err := replaceBetween(counted, beginRaises, endRaises, raisesTable)
	if err != nil {
		return "", err
	}
	if update {
		if err := os.WriteFile(filepath.Join(root, docPath), newDoc, 0o644); err != nil {
			return "", err
		}
	} else {
		if !bytes.Equal(counted, doc) {
			problems = append(problems, fmt.Sprintf("%s: the module counts changed; regenerate with go run ./internal/modcheck graph -update:\n%s", docPath, table))
		}
		if !bytes.Equal(newDoc, counted) {
			problems = append(problems, fmt.Sprintf("%s: the versions each module raises changed; regenerate with go run ./internal/modcheck graph -update:\n%s", docPath, raisesTable))
		}
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "\n"))
	}
	return table + "\n\n" + raisesTable, nil
}

// raisesRow: what m's go.mod makes a user's module graph hold at least,
// by minimal version selection: its go line, its direct requirements
// outside this repository, and those of raisedShown among its indirect
// ones.
func raisesRow(mods []module, m module) string {
	var reqs []string
	for p, v := range m.requires {
		if owner(mods, p).path == "" && (!m.indirect[p] || slices.Contains(raisedShown, p)) {
			reqs = append(reqs, fmt.Sprintf("`%s` %s", p, v))
		}
	}
	slices.Sort(reqs)
	return fmt.Sprintf("| `%s` | %s | %s |", m.path, m.goVersion, strings.Join(reqs, ", "))
}

// replaceBetween replaces what lies from begin to end in doc by table
// (which holds the two markers).
func replaceBetween(doc []byte, begin, end, table string) ([]byte, error) {
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: the generated table's markers are missing (%s)", docPath, begin)
	}
	return slices.Concat(doc[:i], []byte(table), doc[j+len(end):]), nil
}

func display(pkg string) string {
	if pkg == "" {
		return core
	}
	return pkg
}
