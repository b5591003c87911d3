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
