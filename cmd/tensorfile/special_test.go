//go:build cgo && unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tfWithin is tf that fails the test, instead of hanging, when the
// command has not returned within a minute.
func tfWithin(t *testing.T, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- tf(t, args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("tensorfile %s: still running after a minute", strings.Join(args, " "))
		return result{}
	}
}

// unblockFIFO lets a reader blocked in opening the FIFO at path go on
// (at EOF), so that a test that failed by hanging leaves no goroutine
// stuck in open.
func unblockFIFO(path string) {
	if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}

// Inputs that are not regular files (a named pipe, a directory, a
// device) are refused at once, naming the file and what it is: never a
// hang on a pipe with no writer, nor a mapping error about devices.
func TestInputNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"pipe.npy", "pipe.arrow", "pipe"} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no named pipes here:", err)
		}
		t.Cleanup(func() { unblockFIFO(p) })
		paths = append(paths, p)
	}
	for _, name := range []string{"dir.npy", "dir.safetensors", "dir"} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	paths = append(paths, os.DevNull)
	for _, p := range paths {
		out := filepath.Join(dir, "out.safetensors")
		for _, args := range [][]string{{"inspect", p}, {"inspect", "--json", p}, {"convert", p, out}, {"convert", "--from", "npy", p, out}} {
			r := tfWithin(t, args...)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, p+": not a regular file") {
				t.Errorf("tensorfile %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("convert %s wrote %s", p, out)
		}
	}
}

// OUT that exists and is not a regular file (a directory, a device) is
// refused before anything is written, and stays what it was: the rename
// that completes a conversion would otherwise replace a device node
// (/dev/null, /dev/stdout) with a regular file. A symbolic link to a
// regular file is written through, and stays a link. A missing directory
// is named as such, not by a temporary file's name.
func TestOutNotARegularFile(t *testing.T) {
	dir, npy, _, _, _ := goFiles(t)

	outDir := filepath.Join(dir, "outdir.npz")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := tfWithin(t, "convert", npy, outDir)
	if st, err := os.Stat(outDir); r.code != 1 || !strings.Contains(r.stderr, outDir+": not a regular file (a directory)") || err != nil || !st.IsDir() {
		t.Errorf("convert to a directory: exit %d, stderr %q, OUT now %v %v", r.code, r.stderr, st, err)
	}

	dev := filepath.Join(dir, "null.npz")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // /dev/null's numbers
		t.Logf("no device node made (%v): /dev/null itself is left alone", err)
	} else {
		r := tfWithin(t, "convert", npy, dev)
		st, err := os.Lstat(dev)
		if r.code != 1 || !strings.Contains(r.stderr, dev+": not a regular file (a device)") || err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("convert to a device: exit %d, stderr %q, OUT now %v %v", r.code, r.stderr, st, err)
		}
	}

	target := filepath.Join(dir, "target.npz")
	if err := os.WriteFile(target, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.npz")
	if err := os.Symlink("target.npz", link); err != nil {
		t.Fatal(err)
	}
	ok(t, "convert", npy, link)
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st, err)
	}
	rep, _ := inspectJSON(t, target)
	if len(rep.Files) != 1 || len(rep.Files[0].Tensors) != 1 || rep.Files[0].Tensors[0].Name != npyName {
		t.Errorf("the link's target holds %+v", rep)
	}

	missing := filepath.Join(dir, "no", "such", "out.npz")
	r = tfWithin(t, "convert", npy, missing)
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(dir, "no", "such")) || strings.Contains(r.stderr, ".tmp-") {
		t.Errorf("convert into a missing directory: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A file with no tensor converted to .npy (which holds exactly one) is a
// data error naming the file, not a usage error asking to pick one of
// none; converted to any format, it writes no file and exits 1 (an empty
// output would look like a successful conversion).
func TestConvertNoTensorToNPY(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.safetensors")
	if err := os.WriteFile(empty, append([]byte{8, 0, 0, 0, 0, 0, 0, 0}, "{}      "...), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, "inspect", empty)
	out := filepath.Join(dir, "out.npy")
	r := tf(t, "convert", empty, out)
	if r.code != 1 || !strings.Contains(r.stderr, empty+": no tensor to write") || strings.Contains(r.stderr, "--tensor") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("wrote %s", out)
	}
	for _, ext := range []string{".npz", ".safetensors", ".arrow"} {
		out := filepath.Join(dir, "out"+ext)
		r := tf(t, "convert", "--quiet", "--skip-unsupported", empty, out)
		if r.code != 1 || !strings.Contains(r.stderr, empty+": no tensor to write: the file holds none") {
			t.Errorf("to %s: exit %d, stderr %q", ext, r.code, r.stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("wrote %s", out)
		}
	}
}
