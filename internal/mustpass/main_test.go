package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a module outside the repository whose tests skip, fail or
// skip a subtest when the environment says so.
const fixture = `package fixture

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) { t.Log("bit for bit") }

func TestSkips(t *testing.T) {
	if os.Getenv("FIXTURE_SKIP") != "" {
		t.Skip("FIXTURE_PYTHON is not set")
	}
}

func TestSub(t *testing.T) {
	t.Run("child", func(t *testing.T) {
		if os.Getenv("FIXTURE_SUBSKIP") != "" {
			t.Skip("no peer for the child")
		}
	})
}

func TestFails(t *testing.T) {
	if os.Getenv("FIXTURE_FAIL") != "" {
		t.Fatal("planted failure")
	}
}

func FuzzSeeds(f *testing.F) {
	f.Add(1)
	f.Fuzz(func(t *testing.T, n int) {})
}
`

func setup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/fixture\n\ngo 1.25.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fixture_test.go"), []byte(fixture), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	for _, v := range []string{"FIXTURE_SKIP", "FIXTURE_SUBSKIP", "FIXTURE_FAIL"} {
		t.Setenv(v, "")
	}
	return dir
}

func TestMustPass(t *testing.T) {
	dir := setup(t)
	for _, c := range []struct {
		name string
		env  string   // set to 1
		args []string // mustpass's arguments
		fail string   // in the error and output; "" when it must pass
		out  []string // in the output
	}{
		{name: "named tests pass", args: []string{"-show", "bit for bit", ".:TestPasses", ".:TestSkips", "--", "-count=1"},
			out: []string{"--- PASS: TestPasses", "--- PASS: TestSkips", "fixture_test.go:8: bit for bit", "ok  \texample.com/fixture",
				"mustpass: .: TestPasses, TestSkips ran and passed, nothing skipped"}},
		{name: "a named test skips", env: "FIXTURE_SKIP", args: []string{".:TestPasses", ".:TestSkips"},
			fail: "a named test skipped", out: []string{"--- SKIP: TestSkips", ".: TestSkips, a named test, skipped:", "FIXTURE_PYTHON is not set"}},
		{name: "a named test is missing", args: []string{".:TestPasses", ".:TestRenamed"},
			fail: "did not run", out: []string{"--- PASS: TestPasses", ".: TestRenamed did not run"}},
		{name: "a subtest skips", env: "FIXTURE_SUBSKIP", args: []string{".:TestSub"},
			fail: "skipped", out: []string{".: TestSub/child, a test it ran, skipped:", "no peer for the child"}},
		{name: "-all: an unnamed test skips", env: "FIXTURE_SKIP", args: []string{"-all", ".:TestPasses"},
			fail: "skipped", out: []string{"--- PASS: TestFails", ".: TestSkips, a test it ran, skipped:"}},
		{name: "-all passes", args: []string{"-all", ".:TestPasses", "--", "-skip", "^FuzzSeeds$"},
			out: []string{"--- PASS: TestSub", "mustpass: .: TestPasses ran and passed"}},
		{name: "a named test fails", env: "FIXTURE_FAIL", args: []string{".:TestFails"},
			fail: "exit status 1", out: []string{"--- FAIL: TestFails", "its whole output:", "planted failure"}},
		{name: "a fuzz test", args: []string{".:FuzzSeeds", "--", "-fuzz", "^FuzzSeeds$", "-fuzztime", "20x"},
			out: []string{"--- PASS: FuzzSeeds", "mustpass: .: FuzzSeeds ran and passed"}},
		{name: "a fuzz test renamed", args: []string{".:FuzzRenamed", "--", "-fuzz", "^FuzzRenamed$", "-fuzztime", "20x"},
			fail: "did not run"},
		{name: "a package that does not build", args: []string{"./nowhere:TestPasses"}, fail: "./nowhere"},
		{name: "not PKG:TEST", args: []string{"TestPasses"}, fail: "want PKG:TEST"},
		{name: "not a test", args: []string{".:Passes"}, fail: "want PKG:TEST"},
		{name: "twice", args: []string{".:TestPasses", ".:TestPasses"}, fail: "named twice"},
		{name: "-run", args: []string{".:TestPasses", "--", "-run", "."}, fail: "no -run"},
		{name: "nothing named", args: []string{"--", "-count=1"}, fail: "usage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, "1")
			}
			var out strings.Builder
			err := run(c.args, &out, dir)
			switch {
			case c.fail == "" && err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			case c.fail != "" && err == nil:
				t.Fatalf("passed, want an error with %q\n%s", c.fail, out.String())
			case c.fail != "" && !strings.Contains(err.Error()+"\n"+out.String(), c.fail):
				t.Fatalf("error %v, want %q\n%s", err, c.fail, out.String())
			}
			for _, s := range c.out {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}
