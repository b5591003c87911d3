// Command mustpass runs a chosen set of tests and fails unless each of
// them ran and passed: a named test that skipped, or that did not run at
// all (renamed, removed, or compiled out by a build tag), fails the run,
// and so does any test or subtest that skipped among those that ran. The
// make targets that run chosen tests (make arrow, files, gomlx, cli,
// flight, oip, python-loader, dlpark, onnx, fuzz, ...) run them through
// it, so a test whose peer is missing cannot skip and still print ok.
//
//	go run ./internal/mustpass [-show REGEXP] [-all] PKG:TEST... [-- GO TEST FLAGS]
//
// For each package named, in order, it runs
//
//	go test -json FLAGS -run '^(TEST|...)$' PKG
//
// (with -all, without -run: every test of the package runs, and FLAGS
// may -skip some), printing the lines of the -v output that begin with
// ---, ok, FAIL or panic or that match -show, and the whole output when
// go test fails. The go command is $GO, or go.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, ""); err != nil {
		fmt.Fprintln(os.Stderr, "mustpass:", err)
		os.Exit(1)
	}
}

// always: the lines of go test -v output that are printed in any case.
var always = regexp.MustCompile(`^(---|ok|FAIL|panic)`)

// testName: a top-level test, fuzz test or example, as -run matches it.
var testName = regexp.MustCompile(`^(Test|Fuzz|Example)[\p{L}\p{N}_]*$`)

// A package and the tests named in it, in the order given.
type target struct {
	pkg   string
	tests []string
}

// run parses args, runs go test in dir for each package named and
// writes what it prints to w.
func run(args []string, w io.Writer, dir string) error {
	fs := flag.NewFlagSet("mustpass", flag.ContinueOnError)
	fs.SetOutput(w)
	show := fs.String("show", "", "also print the output lines that match this regular expression")
	all := fs.Bool("all", false, "run every test of each package, not only the named ones")
	var flags []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, flags = args[:i], args[i+1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var showRE *regexp.Regexp
	if *show != "" {
		var err error
		if showRE, err = regexp.Compile(*show); err != nil {
			return fmt.Errorf("-show: %v", err)
		}
	}
	names := fs.Args()
	for _, f := range flags {
		if f == "-run" || strings.HasPrefix(f, "-run=") || f == "-test.run" || strings.HasPrefix(f, "-test.run=") {
			return errors.New("the names choose the tests: no -run among the go test flags")
		}
	}
	targets, err := parseNames(names)
	if err != nil {
		return err
	}
	gocmd := os.Getenv("GO")
	if gocmd == "" {
		gocmd = "go"
	}
	var problems []string
	for _, tg := range targets {
		args := slices.Concat([]string{"test", "-json"}, flags)
		if !*all {
			args = append(args, "-run", "^("+strings.Join(tg.tests, "|")+")$")
		}
		args = append(args, tg.pkg)
		res, err := goTest(gocmd, dir, args, w, showRE)
		if err != nil {
			fmt.Fprintf(w, "mustpass: go %s failed; its whole output:\n%s", strings.Join(args, " "), res.text.String())
			return fmt.Errorf("%s: %v", tg.pkg, err)
		}
		p := res.check(tg)
		if len(p) == 0 {
			fmt.Fprintf(w, "mustpass: %s: %s ran and passed, nothing skipped\n", tg.pkg, strings.Join(tg.tests, ", "))
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(w, "mustpass:", p)
		}
		return fmt.Errorf("%d problem(s): a named test skipped or did not run", len(problems))
	}
	return nil
}

// parseNames groups PKG:TEST arguments by package, in the order given.
func parseNames(names []string) ([]target, error) {
	if len(names) == 0 {
		return nil, errors.New("usage: mustpass [-show REGEXP] [-all] PKG:TEST... [-- GO TEST FLAGS]")
	}
	var targets []target
	for _, n := range names {
		pkg, test, ok := strings.Cut(n, ":")
		if !ok || pkg == "" || !testName.MatchString(test) {
			return nil, fmt.Errorf("%q: want PKG:TEST, such as ./dlarrow:TestOpenFileFlipSweep", n)
		}
		i := slices.IndexFunc(targets, func(t target) bool { return t.pkg == pkg })
		if i < 0 {
			targets = append(targets, target{pkg: pkg})
			i = len(targets) - 1
		}
		if slices.Contains(targets[i].tests, test) {
			return nil, fmt.Errorf("%q: named twice", n)
		}
		targets[i].tests = append(targets[i].tests, test)
	}
	return targets, nil
}

// event is a line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// result: what one go test -json run reported.
type result struct {
	text    strings.Builder     // the -v output, reassembled
	ran     map[string]bool     // every test and subtest that started
	skipped []string            // those that skipped, in order
	output  map[string][]string // each test's own output lines
}

// goTest runs the go command with args in dir and reads its events,
// printing the lines worth printing as they come.
func goTest(gocmd, dir string, args []string, w io.Writer, show *regexp.Regexp) (*result, error) {
	cmd := exec.Command(gocmd, args...)
	cmd.Dir = dir
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return &result{}, err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	res := &result{ran: map[string]bool{}, output: map[string][]string{}}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			e = event{Action: "output", Output: string(line) + "\n"} // not an event: the go command's own words
		}
		switch e.Action {
		case "run":
			res.ran[e.Test] = true
		case "skip":
			if e.Test != "" {
				res.skipped = append(res.skipped, e.Test)
			}
		case "output", "build-output":
			res.text.WriteString(e.Output)
			if e.Test != "" {
				res.output[e.Test] = append(res.output[e.Test], strings.TrimRight(e.Output, "\n"))
			}
			l := strings.TrimRight(e.Output, "\n")
			sub := strings.Contains(e.Test, "/") && strings.HasPrefix(l, "---") // a subtest's result: its test's says enough
			if always.MatchString(l) && !sub || show != nil && show.MatchString(l) {
				fmt.Fprintln(w, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		pr.CloseWithError(err)
		<-done
		return res, err
	}
	return res, <-done
}

// check: the problems of a run that passed, for the tests tg names.
func (r *result) check(tg target) []string {
	var problems []string
	for _, t := range tg.tests {
		if !r.ran[t] {
			problems = append(problems, fmt.Sprintf("%s: %s did not run (no test of that name here: renamed, removed or built out?)", tg.pkg, t))
		}
	}
	for _, t := range r.skipped {
		what := "a test it ran"
		if slices.Contains(tg.tests, t) {
			what = "a named test"
		}
		problems = append(problems, fmt.Sprintf("%s: %s, %s, skipped:\n%s", tg.pkg, t, what, strings.Join(r.output[t], "\n")))
	}
	return problems
}
