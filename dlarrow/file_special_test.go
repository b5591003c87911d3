//go:build unix

package dlarrow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godlpack/dlpack/dlarrow"
)

// A path that is not a regular file fails at once with ErrFormat, naming
// what it is: a named pipe blocked OpenFile until a writer came, and a
// directory failed as "mmap: no such device".
func TestOpenFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.arrow")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	t.Cleanup(func() { // an open still blocked goes on, at EOF
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	for _, c := range []struct{ path, kind string }{{fifo, "named pipe"}, {dir, "directory"}, {os.DevNull, "device"}} {
		done := make(chan error, 1)
		go func() {
			f, err := dlarrow.OpenFile(c.path)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, dlarrow.ErrFormat) || !strings.Contains(err.Error(), c.kind) {
				t.Errorf("OpenFile(%s): %v, want ErrFormat naming a %s", c.path, err, c.kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OpenFile(%s) blocked", c.path)
		}
	}
}
