package dlpack_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bridgesTableHeader opens the README's bridges table.
const bridgesTableHeader = "| package | into a tensor | out of a tensor | copies |"

// bridgeRow is one row of the README's bridges table: the package and the
// names in backquotes of its three other cells.
type bridgeRow struct {
	line  int
	pkg   string
	names []string
}

// readBridgesTable returns the rows of the bridges table of the README at
// path.
func readBridgesTable(t *testing.T, path string) []bridgeRow {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	quoted := regexp.MustCompile("`([^`]+)`")
	var rows []bridgeRow
	in := false
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == bridgesTableHeader:
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			return rows
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("%s:%d: %d cells, want 4: %s", path, n, len(cells), line)
		}
		pkg := quoted.FindStringSubmatch(cells[0])
		if pkg == nil {
			t.Fatalf("%s:%d: no package in backquotes: %s", path, n, cells[0])
		}
		row := bridgeRow{line: n, pkg: pkg[1]}
		for _, cell := range cells[1:] {
			for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
				row.names = append(row.names, m[1])
			}
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s: no bridges table (a line %q)", path, bridgesTableHeader)
	}
	return rows
}

// packageDir is the directory of a package named in the table: the root
// package is dlpack, every other one a directory of the root.
func packageDir(pkg string) string {
	if pkg == "dlpack" {
		return "."
	}
	return pkg
}

// leadingName is the Go name a table entry starts with: "Produce" of
// "Produce(src, req)", "CopyFromArray" of "CopyFromArray[T]", "Request" of
// "Request{Copy: CopyAlways}", "Client.Get" of "Client.Get", and
// "dlpack.From" of "dlpack.From(p)" (a package-qualified name).
var leadingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?`)

// exportedNames returns the package name of the non-test Go files of dir
// (every build configuration) and their exported top-level names:
// functions, types, constants and variables as "Name", methods as
// "Type.Method".
func exportedNames(t *testing.T, dir string) (string, map[string]bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	pkg := ""
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg = f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil || len(d.Recv.List) == 0 {
					names[d.Name.Name] = true
				} else if recv := receiverName(d.Recv.List[0].Type); ast.IsExported(recv) {
					names[recv+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = s.Name.IsExported()
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = n.IsExported()
						}
					}
				}
			}
		}
	}
	return pkg, names
}

// receiverName is T of a receiver T, *T, T[P] or *T[P].
func receiverName(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// TestReadmeBridgesTable: every name in the README's bridges table exists,
// exported, in the package its row names (methods as Type.Method), so the
// table cannot drift from the code; and every bridge package of the
// repository (a top-level dl* directory with Go code, and tensorfile) has a
// row. A row whose package directory is not in this tree is logged and
// skipped.
func TestReadmeBridgesTable(t *testing.T) {
	checkBridgesTable(t, "README.md")
}

func checkBridgesTable(t *testing.T, readme string) {
	rows := readBridgesTable(t, readme)
	listed := map[string]bool{}
	checked := 0
	for _, row := range rows {
		listed[row.pkg] = true
		dir := packageDir(row.pkg)
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			t.Logf("%s:%d: package %s is not in this tree; its row is not checked", readme, row.line, row.pkg)
			continue
		}
		pkg, names := exportedNames(t, dir)
		if pkg != row.pkg {
			t.Errorf("%s:%d: directory %s holds package %q, not %q", readme, row.line, dir, pkg, row.pkg)
			continue
		}
		if len(row.names) == 0 {
			t.Errorf("%s:%d: the row of %s names nothing", readme, row.line, row.pkg)
		}
		for _, entry := range row.names {
			name := leadingName.FindString(entry)
			have := names
			if q, rest, ok := strings.Cut(name, "."); ok && !ast.IsExported(q) {
				// A package-qualified name: dlpack.Produce.
				qdir := packageDir(q)
				if _, err := os.Stat(qdir); err != nil {
					t.Errorf("%s:%d: %s: no package %s", readme, row.line, entry, q)
					continue
				}
				_, have = exportedNames(t, qdir)
				name = rest
			}
			if name == "" || !have[name] {
				t.Errorf("%s:%d: the %s row names %q, but package %s has no exported %s", readme, row.line, row.pkg, entry, row.pkg, name)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("%s: only %d names checked in the bridges table", readme, checked)
	}
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		name := d.Name()
		if !d.IsDir() || !(strings.HasPrefix(name, "dl") || name == "tensorfile") {
			continue
		}
		if goFiles, _ := filepath.Glob(filepath.Join(name, "*.go")); len(goFiles) == 0 {
			continue
		}
		if !listed[name] {
			t.Errorf("%s: the bridges table has no row for package %s", readme, name)
		}
	}
}

// TestBridgeDocsOpenWithTheirRow: the package documentation of every
// bridge in the README's bridges table names, before its first heading,
// every entry of the package's row (`go doc` of a package opens with its
// row). The root package's row is the subject of its whole doc.go.
func TestBridgeDocsOpenWithTheirRow(t *testing.T) {
	for _, row := range readBridgesTable(t, "README.md") {
		if row.pkg == "dlpack" {
			continue
		}
		intro, ok := packageDocIntro(t, packageDir(row.pkg))
		if !ok {
			t.Logf("package %s is not in this tree", row.pkg)
			continue
		}
		for _, entry := range row.names {
			name := leadingName.FindString(entry)
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(intro) {
				t.Errorf("README.md:%d: package %s's documentation does not name %s before its first heading", row.line, row.pkg, name)
			}
		}
	}
}

// packageDocIntro returns the package documentation of the non-test Go
// files of dir up to its first heading ("# ..." line).
func packageDocIntro(t *testing.T, dir string) (string, bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		return "", false
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc == nil {
			continue
		}
		doc := f.Doc.Text()
		if i := strings.Index(doc, "\n# "); i >= 0 {
			doc = doc[:i]
		}
		return doc, true
	}
	t.Errorf("%s: no package documentation", dir)
	return "", true
}
