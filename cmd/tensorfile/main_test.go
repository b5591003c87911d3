//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/internal/leakcheck"
	"github.com/godlpack/dlpack/tensorfile"
)

// TestMain runs the command itself when the test binary is started as it
// (TENSORFILE_TEST_MAIN=1, with a progress threshold of 0), and otherwise
// the tests, failing them if C memory leaked.
func TestMain(m *testing.M) {
	if os.Getenv("TENSORFILE_TEST_MAIN") == "1" {
		progressMin = 0
		main()
		return
	}
	leakcheck.Main(m)
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// tf runs the command in the test process, and checks that every file
// mapping it made is gone when it returns.
func tf(t *testing.T, args ...string) result {
	t.Helper()
	before := tensorfile.LiveMappings()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	if n := tensorfile.LiveMappings(); n != before {
		t.Errorf("tensorfile %s: %d file mappings left (%d before)", strings.Join(args, " "), n, before)
	}
	return result{code, out.String(), errb.String()}
}

// ok runs the command and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := tf(t, args...)
	if r.code != 0 {
		t.Fatalf("tensorfile %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// inspectJSON runs inspect --json and decodes the document.
func inspectJSON(t *testing.T, files ...string) (jsonReport, result) {
	t.Helper()
	r := tf(t, append([]string{"inspect", "--json"}, files...)...)
	var rep jsonReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	return rep, r
}

// goFiles writes, with the library's writers, a .npy, a .npz, a
// safetensors file and (through convert) an Arrow file of the same
// tensors, and returns their paths.
func goFiles(t *testing.T) (dir string, npy, npz, st, arrow string) {
	t.Helper()
	dir = t.TempDir()
	w := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	b := dlpack.NewArray([]int16{-1, 7, 9}, []int64{3})
	write := func(name string, fill func(*os.File) error) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := fill(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	named := []tensorfile.Named{{Name: "w", Tensor: w}, {Name: "b", Tensor: b}}
	npy = write("w.npy", func(f *os.File) error { return tensorfile.WriteNPY(f, w) })
	npz = write("wb.npz", func(f *os.File) error { return tensorfile.WriteNPZ(f, named, false) })
	st = write("wb.safetensors", func(f *os.File) error {
		return tensorfile.WriteSafetensors(f, named, map[string]string{"format": "go"})
	})
	arrow = filepath.Join(dir, "wb.arrow")
	ok(t, "convert", st, arrow)
	return
}

func TestUsage(t *testing.T) {
	dir, npy, npz, _, _ := goFiles(t)
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr, or stdout for -h
	}{
		{nil, 2, "usage: tensorfile"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"-h"}, 0, "usage: tensorfile <command>"},
		{[]string{"inspect", "-h"}, 0, "usage: tensorfile inspect"},
		{[]string{"convert", "--help"}, 0, "usage: tensorfile convert"},
		{[]string{"inspect"}, 2, "no files named"},
		{[]string{"inspect", "--bogus", npy}, 2, "flag provided but not defined: -bogus"},
		{[]string{"inspect", "--from", "hdf5", npy}, 2, `unknown format "hdf5"`},
		{[]string{"convert", npy}, 2, "want IN OUT, got 1 arguments"},
		{[]string{"convert", npy, filepath.Join(dir, "out.bin")}, 2, "cannot tell the output format"},
		{[]string{"convert", "--compress", npy, filepath.Join(dir, "out.npy")}, 2, "--compress applies to .npz outputs only"},
		{[]string{"convert", npz, filepath.Join(dir, "out.npy")}, 2, `holds 2 tensors and a .npy file one: pick it with --tensor NAME ("w", "b")`},
	} {
		r := tf(t, c.args...)
		text := r.stderr
		if c.code == 0 {
			text = r.stdout
		}
		if r.code != c.code || !strings.Contains(text, c.want) {
			t.Errorf("tensorfile %q: exit %d, want %d with %q\nstdout: %s\nstderr: %s", c.args, r.code, c.code, c.want, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.npy")); !os.IsNotExist(err) {
		t.Errorf("a refused convert left out.npy: %v", err)
	}
}

// Every format reads back the library's own files; inspect --json and the
// table say the same; flags go before or after the files.
func TestInspectGoFiles(t *testing.T) {
	_, npy, npz, st, arrow := goFiles(t)
	rep, r := inspectJSON(t, npy, npz, st, arrow)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// a 0-d tensor's shape and strides are [], not null
	scalar := filepath.Join(t.TempDir(), "s.npy")
	f, err := os.Create(scalar)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensorfile.WriteNPY(f, &dlpack.Array[float64]{Data: []float64{2.5}, Shape: []int64{}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r := ok(t, "inspect", "--json", scalar); !strings.Contains(r.stdout, `"shape": [],`) || !strings.Contains(r.stdout, `"strides": [],`) {
		t.Errorf("0-d tensor:\n%s", r.stdout)
	}
	want := map[string]struct {
		format string
		names  []string
		meta   bool
	}{
		npy: {"npy", []string{""}, false}, npz: {"npz", []string{"w", "b"}, false},
		st: {"safetensors", []string{"w", "b"}, true}, arrow: {"arrow", []string{"w", "b"}, true},
	}
	if len(rep.Files) != 4 {
		t.Fatalf("%d files in the report", len(rep.Files))
	}
	for _, f := range rep.Files {
		w := want[f.Path]
		if f.Format != w.format || f.Error != "" || len(f.Tensors) != len(w.names) {
			t.Errorf("%s: %+v", f.Path, f)
			continue
		}
		if w.meta != (f.Metadata["format"] == "go") {
			t.Errorf("%s: metadata %v", f.Path, f.Metadata)
		}
		for _, tn := range f.Tensors {
			if !tn.Mapped {
				t.Errorf("%s: %q not mapped", f.Path, tn.Name)
			}
			switch tn.Name {
			case "", "w":
				if tn.DType != "float32" || !equal(tn.Shape, 2, 3) || !equal(tn.Strides, 3, 1) || tn.Bytes != 24 || tn.Layout != "C" {
					t.Errorf("%s: %+v", f.Path, tn)
				}
			case "b":
				if tn.DType != "int16" || !equal(tn.Shape, 3) || tn.Bytes != 6 {
					t.Errorf("%s: %+v", f.Path, tn)
				}
			default:
				t.Errorf("%s: unexpected tensor %q", f.Path, tn.Name)
			}
		}
	}

	// the table: a header line, then NAME/DTYPE/... columns aligned
	out := ok(t, "inspect", st, "--from", "safetensors").stdout
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], st+": safetensors, 2 tensors, 30 B") || len(lines) != 6 {
		t.Fatalf("table:\n%s", out)
	}
	header := lines[1]
	for i, col := range []string{"NAME", "DTYPE", "SHAPE", "BYTES", "LAYOUT", "ZERO-COPY"} {
		at := strings.Index(header, col)
		row := []string{"w", "float32", "(2, 3)", "24", "C", "mapped"}[i]
		if at < 0 || !strings.HasPrefix(lines[2][at:], row) {
			t.Errorf("column %s at %d: row %q", col, at, lines[2])
		}
	}
	if strings.TrimRight(lines[2], " ") != lines[2] || lines[4] != "  metadata:" || lines[5] != "    format: go" {
		t.Errorf("table:\n%s", out)
	}
}

// Malformed files: the library's own error, exit 1, no panic, no output
// file; a prefix of every length of each format is refused or read.
func TestMalformed(t *testing.T) {
	dir, npy, npz, st, arrow := goFiles(t)
	bad := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	npyBytes, npzBytes, stBytes, arrowBytes := read(npy), read(npz), read(st), read(arrow)
	badHeader := append([]byte(nil), npyBytes...)
	copy(badHeader[10:], "{'descr': '<f4', 'fortran_order': maybe, ")
	stBadJSON := append([]byte(nil), stBytes...)
	stBadJSON[8] = '['
	stHuge := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0}, stBytes[8:]...)
	garbage := bytes.Repeat([]byte("garbage!"), 40)

	libraryErr := map[format]func(string) error{
		formatNPY:         func(p string) error { _, err := tensorfile.OpenNPY(p); return err },
		formatNPZ:         func(p string) error { _, err := tensorfile.OpenNPZ(p); return err },
		formatSafetensors: func(p string) error { _, err := tensorfile.OpenSafetensors(p); return err },
		formatArrow:       func(p string) error { _, err := dlarrow.OpenFile(p); return err },
	}
	cases := []struct {
		path string
		f    format
		want string // part of the library's error
	}{
		{bad("trunc.npy", npyBytes[:len(npyBytes)-5]), formatNPY, "file size disagrees with its header"},
		{bad("header.npy", badHeader), formatNPY, "malformed header"},
		{bad("garbage.npy", garbage), formatNPY, "malformed header"},
		{bad("trunc.npz", npzBytes[:len(npzBytes)/2]), formatNPZ, "tensorfile:"},
		{bad("garbage.npz", garbage), formatNPZ, "tensorfile:"},
		{bad("trunc.safetensors", stBytes[:len(stBytes)-3]), formatSafetensors, "file size disagrees with its header"},
		{bad("json.safetensors", stBadJSON), formatSafetensors, "malformed header"},
		{bad("huge.safetensors", stHuge), formatSafetensors, "tensorfile:"},
		{bad("garbage.safetensors", garbage), formatSafetensors, "tensorfile:"},
		{bad("trunc.arrow", arrowBytes[:len(arrowBytes)-9]), formatArrow, "dlarrow:"},
		{bad("garbage.arrow", garbage), formatArrow, "dlarrow:"},
		{bad("empty.arrow", nil), formatArrow, "cannot be an Arrow file"},
	}
	for _, c := range cases {
		r := tf(t, "inspect", c.path)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("inspect %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", filepath.Base(c.path), r.code, r.stdout, r.stderr, c.want)
		}
		if open := libraryErr[c.f]; open != nil {
			err := open(c.path)
			if err == nil || !strings.Contains(r.stderr, err.Error()) {
				t.Errorf("inspect %s: stderr %q lacks the library's error %v", filepath.Base(c.path), r.stderr, err)
			}
		}
		rep, r2 := inspectJSON(t, c.path)
		if r2.code != 1 || len(rep.Files) != 1 || !strings.Contains(rep.Files[0].Error, c.want) || len(rep.Files[0].Tensors) != 0 || rep.Files[0].Format != string(c.f) {
			t.Errorf("inspect --json %s: exit %d, %+v", filepath.Base(c.path), r2.code, rep)
		}
		out := filepath.Join(dir, "out-"+filepath.Base(c.path)+".safetensors")
		r3 := tf(t, "convert", c.path, out)
		if r3.code != 1 || !strings.Contains(r3.stderr, c.want) {
			t.Errorf("convert %s: exit %d, stderr %q", filepath.Base(c.path), r3.code, r3.stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("convert %s left %s", filepath.Base(c.path), out)
		}
	}

	// a good file and a bad one: the good one is printed, exit 1
	r := tf(t, "inspect", npy, cases[0].path)
	if r.code != 1 || !strings.Contains(r.stdout, "float32") || !strings.Contains(r.stderr, "trunc.npy") {
		t.Errorf("inspect good bad: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// prefixes of every format (the last byte missing too): an error
	for _, c := range []struct {
		ext   string
		whole []byte
	}{{".npy", npyBytes}, {".npz", npzBytes}, {".safetensors", stBytes}, {".arrow", arrowBytes}} {
		ext := c.ext
		for n := 0; n < len(c.whole); n += 1 + n/128 { // every length up to 128, then sparser
			path := bad("prefix"+ext, c.whole[:n])
			if r := tf(t, "inspect", "--json", path); r.code != 1 {
				t.Fatalf("%d-byte prefix of a %s file: exit %d\n%s", n, ext, r.code, r.stdout)
			}
		}
		path := bad("prefix"+ext, c.whole[:len(c.whole)-1])
		if r := tf(t, "inspect", path); r.code != 1 {
			t.Fatalf("a %s file without its last byte: exit %d\n%s", ext, r.code, r.stdout)
		}
	}
}

// convert leaves an existing OUT untouched, and no temporary file, when it
// fails after creating the temporary file.
func TestConvertFailureKeepsOut(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "c.safetensors")
	f, err := os.Create(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensorfile.WriteSafetensors(f, []tensorfile.Named{
		{Name: "a", Tensor: dlpack.NewArray([]float32{1, 2}, []int64{2})},
		{Name: "z", Tensor: dlpack.NewArray([]complex64{1, 2i}, []int64{2})},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(dir, "out.arrow")
	if err := os.WriteFile(out, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := tf(t, "convert", st, out)
	if r.code != 1 || !strings.Contains(r.stderr, `tensor "z"`) || !strings.Contains(r.stderr, "dlarrow: type has no tensor form") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "previous" {
		t.Errorf("OUT changed to %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		for _, e := range entries {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}
	// picking the tensor Arrow holds succeeds, and replaces OUT
	ok(t, "convert", "--tensor", "a", st, out)
	rep, _ := inspectJSON(t, out)
	if len(rep.Files[0].Tensors) != 1 || rep.Files[0].Tensors[0].Name != "a" {
		t.Errorf("after --tensor a: %+v", rep)
	}
}

// The progress bar appears only on a terminal: the command sees none in
// the test (its stderr is a buffer, or a pipe in a child process); a
// terminal, simulated, gets the bar.
func TestProgressOnlyOnTerminal(t *testing.T) {
	dir, _, _, st, _ := goFiles(t)
	old := progressMin
	progressMin = 0
	t.Cleanup(func() { progressMin = old })

	r := ok(t, "convert", st, filepath.Join(dir, "a.arrow"))
	if r.stderr != "" || r.stdout != "" {
		t.Errorf("not a terminal: stdout %q, stderr %q", r.stdout, r.stderr)
	}

	// the real command, its stdout and stderr pipes
	cmd := exec.Command(os.Args[0], "convert", st, filepath.Join(dir, "b.safetensors"))
	cmd.Env = append(os.Environ(), "TENSORFILE_TEST_MAIN=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if out.Len() != 0 || errb.Len() != 0 {
		t.Errorf("child with pipes: stdout %q, stderr %q", out.String(), errb.String())
	}

	oldTerm := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { isTerminal = oldTerm })
	r = ok(t, "convert", st, filepath.Join(dir, "c.safetensors"))
	if !strings.Contains(r.stderr, "\rconverting   0% |") {
		t.Errorf("on a terminal: stderr %q", r.stderr)
	}
	r = ok(t, "convert", "--quiet", st, filepath.Join(dir, "d.safetensors"))
	if r.stderr != "" {
		t.Errorf("--quiet on a terminal: stderr %q", r.stderr)
	}
}

func equal(got []int64, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// Files named without a known extension are recognised by their first
// bytes; unknown names and bytes need --from; notes go with --quiet.
func TestSniffPickAndNotes(t *testing.T) {
	dir, npy, npz, st, arrow := goFiles(t)
	for src, want := range map[string]string{npy: "npy", npz: "npz", st: "safetensors", arrow: "arrow"} {
		renamed := filepath.Join(dir, "renamed-"+want+".bin")
		if err := os.Rename(src, renamed); err != nil {
			t.Fatal(err)
		}
		rep, r := inspectJSON(t, renamed)
		if r.code != 0 || rep.Files[0].Format != want {
			t.Errorf("%s: exit %d, %+v", renamed, r.code, rep)
		}
	}
	junk := filepath.Join(dir, "junk.bin")
	if err := os.WriteFile(junk, []byte("not a tensor file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := tf(t, "inspect", junk); r.code != 1 || !strings.Contains(r.stderr, "name it with --from") {
		t.Errorf("junk: exit %d, %q", r.code, r.stderr)
	}
	if r := tf(t, "inspect", "--from", "npy", junk); r.code != 1 || !strings.Contains(r.stderr, "tensorfile: malformed header") {
		t.Errorf("junk as npy: exit %d, %q", r.code, r.stderr)
	}

	st = filepath.Join(dir, "renamed-safetensors.bin")
	r := tf(t, "convert", "--from", "safetensors", "--tensor", "nope", st, filepath.Join(dir, "x.npz"))
	if r.code != 1 || !strings.Contains(r.stderr, `tensorfile: no such tensor: "nope" (it has "w", "b")`) {
		t.Errorf("--tensor nope: exit %d, %q", r.code, r.stderr)
	}
	r = ok(t, "convert", "--from", "safetensors", "--tensor", "b", st, filepath.Join(dir, "b.npy"))
	if !strings.Contains(r.stderr, "tensorfile: note: npy has no metadata; 1 metadata entry") {
		t.Errorf("no note: %q", r.stderr)
	}
	r = ok(t, "convert", "--quiet", "--from", "safetensors", "--to", "npz", st, filepath.Join(dir, "b.out"))
	if r.stderr != "" {
		t.Errorf("--quiet: %q", r.stderr)
	}
	rep, _ := inspectJSON(t, filepath.Join(dir, "b.npy"), filepath.Join(dir, "b.out"))
	if f := rep.Files[0]; f.Format != "npy" || len(f.Tensors) != 1 || f.Tensors[0].DType != "int16" {
		t.Errorf("b.npy: %+v", f)
	}
	if f := rep.Files[1]; f.Format != "npz" || len(f.Tensors) != 2 {
		t.Errorf("b.out: %+v", f)
	}
}

// A stored .npz member whose bytes fail their CRC-32 is refused by inspect
// --verify and convert, as np.load refuses it, although the member is
// mapped (a plain inspect, which skips reading mapped members, shows it
// unchecked): a conversion never carries bytes NumPy would not read.
func TestNPZMappedMemberCRC(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	// uint8: aligned at any offset, so the stored member is mapped
	if err := tensorfile.WriteNPZ(&buf, []tensorfile.Named{{Name: "a", Tensor: dlpack.NewArray([]uint8{1, 2, 3, 4, 5, 6, 7, 8}, []int64{8})}}, false); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.Index(b, []byte("\x93NUMPY"))
	hlen := int(b[i+8]) | int(b[i+9])<<8
	b[i+10+hlen+3] ^= 0x10
	in, out := filepath.Join(dir, "bad.npz"), filepath.Join(dir, "out.safetensors")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := tensorfile.OpenNPZ(in, tensorfile.SkipMappedCRC())
	if err != nil {
		t.Fatal(err)
	}
	mapped := f.Tensors()[0].Mapped()
	f.Close()
	if !mapped {
		t.Fatal("the uint8 member is not mapped: the test does not test the mapped path")
	}
	// A plain inspect does not read it, and says so.
	if r := tf(t, "inspect", in); r.code != 0 || !strings.Contains(r.stdout, "unchecked") {
		t.Errorf("tensorfile inspect: exit %d, stdout %q; want 0 and the member unchecked", r.code, r.stdout)
	}
	for _, args := range [][]string{{"inspect", "--verify", in}, {"convert", in, out}} {
		if r := tf(t, args...); r.code != 1 || !strings.Contains(r.stderr, "tensorfile: checksum mismatch") {
			t.Errorf("tensorfile %s: exit %d, stderr %q; want 1 and the checksum error", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("convert of a member failing its CRC-32 wrote %s", out)
	}
}

// countingWriter counts the Write calls made on it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// inspect buffers its output: a file of 10,000 tensors is printed in a
// write per 64 KiB, not one per table cell (tabwriter writes each cell
// on its own), as a table and as JSON.
func TestInspectBufferedOutput(t *testing.T) {
	specs := make([]tensorfile.Spec, 10_000)
	for i := range specs {
		specs[i] = tensorfile.Spec{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: dlpack.Float32, Shape: []int64{2, 2}}
	}
	path := filepath.Join(t.TempDir(), "many.safetensors")
	f, err := tensorfile.CreateSafetensors(path, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, args := range [][]string{{"inspect", path}, {"inspect", "--json", path}} {
		var out countingWriter
		var errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if most := out.Len()/(64<<10) + 1; out.writes > most || strings.Count(out.String(), "model.layers.") != 10_000 {
			t.Errorf("%v: %d bytes in %d writes, want at most %d", args, out.Len(), out.writes, most)
		}
	}
}
