//go:build unix

package tensorfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godlpack/dlpack/tensorfile"
)

// Opening a path that is not a regular file fails at once with
// ErrFormat, naming what it is: a named pipe does not block the open
// until a writer comes, and a directory or a device is not reported as a
// mapping error.
func TestOpenNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.npy")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	t.Cleanup(func() { // a reader still blocked in open goes on, at EOF
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	opens := map[string]func(string) error{
		"OpenNPY":         func(p string) error { _, err := tensorfile.OpenNPY(p); return err },
		"OpenNPZ":         func(p string) error { _, err := tensorfile.OpenNPZ(p); return err },
		"OpenSafetensors": func(p string) error { _, err := tensorfile.OpenSafetensors(p); return err },
		"ReadNPY":         func(p string) error { _, err := tensorfile.ReadNPY(p); return err },
	}
	for _, c := range []struct{ path, kind string }{{fifo, "named pipe"}, {dir, "directory"}, {os.DevNull, "device"}} {
		for name, open := range opens {
			done := make(chan error, 1)
			go func() { done <- open(c.path) }()
			select {
			case err := <-done:
				if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), c.kind) {
					t.Errorf("%s(%s): %v, want ErrFormat naming a %s", name, c.path, err, c.kind)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s(%s): still blocked after a minute", name, c.path)
			}
		}
	}
	if n := tensorfile.LiveMappings(); n != 0 {
		t.Fatalf("%d mappings left", n)
	}
}
