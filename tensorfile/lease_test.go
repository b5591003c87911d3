//go:build linux

package tensorfile_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// A lease tells the owner of a mapped file that another process is
// opening it for writing or truncating it. A blocking open (the shell's
// >>) waits until the owner closes the File; coreutils truncate opens with
// O_NONBLOCK, so it fails at once (EAGAIN) and the file stays whole, the
// lease broken all the same.
func TestLeaseBreaksWhenAnotherProcessWrites(t *testing.T) {
	noLiveMappings(t)
	for name, c := range map[string]struct {
		cmd   []string
		waits bool
	}{
		"open for writing": {[]string{"sh", "-c", `: >> "$0"`}, true},
		"truncate":         {[]string{"truncate", "-s", "0"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			content := f64npy(1024)
			path := writeTemp(t, "a.npy", content)
			f, err := tensorfile.OpenNPY(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			broken, err := f.Lease()
			if err != nil {
				t.Fatal(err)
			}
			if again, err := f.Lease(); err != nil || again != broken {
				t.Fatalf("second Lease: %v, same channel %v", err, again == broken)
			}
			cmd := exec.Command(c.cmd[0], append(c.cmd[1:], path)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-broken:
			case <-time.After(20 * time.Second):
				t.Fatal("no lease break within 20 s")
			}
			if !c.waits {
				if err := <-done; err == nil {
					t.Fatalf("%v succeeded against the lease", c.cmd)
				}
				if b, err := os.ReadFile(path); err != nil || len(b) != len(content) {
					t.Fatalf("file after the refused %v: %d bytes, %v", c.cmd, len(b), err)
				}
				return
			}
			// The writer waits for the holder: the mapped data is intact.
			tn := f.Tensors()[0]
			buf := make([]byte, tn.NBytes())
			if _, err := tn.CopyTo(buf); err != nil {
				t.Fatalf("CopyTo while the writer waits: %v", err)
			}
			select {
			case err := <-done:
				t.Fatalf("%v finished (%v) before the holder closed the file", c.cmd, err)
			default:
			}
			f.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v: %v", c.cmd, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the writer still waits after Close")
			}
		})
	}
}

func TestLeaseRefusals(t *testing.T) {
	noLiveMappings(t)
	path := writeTemp(t, "a.npy", f64npy(16))
	rw, err := tensorfile.OpenNPY(path, tensorfile.ReadWrite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Lease(); !errors.Is(err, tensorfile.ErrLease) {
		t.Errorf("Lease of a ReadWrite file: %v", err)
	}
	rw.Close()

	// Another process holding the file open for writing: EAGAIN.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Lease(); !errors.Is(err, tensorfile.ErrLease) {
		t.Errorf("Lease of a file open for writing: %v", err)
	} else {
		t.Log(err)
	}
	w.Close()
	f.Close()
	if _, err := f.Lease(); !errors.Is(err, dlpack.ErrClosed) {
		t.Errorf("Lease after Close: %v", err)
	}

	// A file replaced by rename since it was opened.
	g, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	other := filepath.Join(filepath.Dir(path), "b.npy")
	if err := os.WriteFile(other, f64npy(16), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Lease(); !errors.Is(err, tensorfile.ErrLease) {
		t.Errorf("Lease after the path was replaced: %v", err)
	}
}

// Leases on tmpfs (/dev/shm), where the kernel supports them too.
func TestLeaseOnTmpfs(t *testing.T) {
	dir, err := os.MkdirTemp("/dev/shm", "lease")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.npy")
	if err := os.WriteFile(path, f64npy(16), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Lease(); err != nil {
		t.Fatalf("Lease on tmpfs: %v", err)
	}
}
