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

	"github.com/godlpack/dlpack"
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

// Creating a file over one that is still mapped replaces it (a rename)
// instead of truncating it in place: the old mapping keeps its pages and
// its bytes, where a truncation made its next read fault (SIGBUS). A path
// that is not a regular file is refused and left where it was (the
// failed create used to remove it), and a symbolic link stays a link.
func TestCreateOverMappedAndSpecial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.npy")
	old, err := tensorfile.CreateNPY(path, dlpack.Float32, []int64{4096})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	fr, err := dlpack.From(old.Tensors()[0], dlpack.RequireWritable())
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	v, err := dlpack.Slice[float32](fr)
	if err != nil {
		t.Fatal(err)
	}
	v[4095] = 7
	for _, create := range []func() (*tensorfile.File, error){
		func() (*tensorfile.File, error) { return tensorfile.CreateNPY(path, dlpack.Float32, []int64{1}) },
		func() (*tensorfile.File, error) {
			return tensorfile.CreateSafetensors(path, []tensorfile.Spec{{Name: "x", DType: dlpack.Int8}}, nil)
		},
	} {
		nf, err := create()
		if err != nil {
			t.Fatal(err)
		}
		if got := v[4095]; got != 7 { // faulted before
			t.Fatalf("the old mapping reads %v, want 7", got)
		}
		nf.Close()
	}

	link := filepath.Join(dir, "link.npy")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	nf, err := tensorfile.CreateNPY(link, dlpack.Int16, []int64{3})
	if err != nil {
		t.Fatal(err)
	}
	nf.Close()
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", st, err)
	}
	if f, err := tensorfile.OpenNPY(path); err != nil || f.Tensors()[0].DataType() != dlpack.Int16 {
		t.Fatalf("the link's target was not written: %v", err)
	} else {
		f.Close()
	}

	fifo := filepath.Join(dir, "pipe.npy")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	for _, p := range []string{fifo, dir} {
		_, err := tensorfile.CreateNPY(p, dlpack.Float32, []int64{2})
		if !errors.Is(err, tensorfile.ErrFormat) {
			t.Errorf("CreateNPY(%s): %v, want ErrFormat", p, err)
		}
		_, err = tensorfile.CreateSafetensors(p, nil, nil)
		if !errors.Is(err, tensorfile.ErrFormat) {
			t.Errorf("CreateSafetensors(%s): %v, want ErrFormat", p, err)
		}
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("left in the directory: %v (temporary files?)", ents)
	}
}

// A created file has the mode an open with O_CREAT gives (0644 less the
// umask), and a replaced file keeps its own, as when the file was
// truncated in place: a private file stays private.
func TestCreateMode(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	path := filepath.Join(dir, "t.npy")
	for _, c := range []struct {
		before os.FileMode // 0: no file
		want   os.FileMode
	}{{0, 0o640}, {0o600, 0o600}, {0o664, 0o664}} {
		os.Remove(path)
		if c.before != 0 {
			if err := os.WriteFile(path, nil, c.before); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.before); err != nil {
				t.Fatal(err)
			}
		}
		for _, create := range []func() (*tensorfile.File, error){
			func() (*tensorfile.File, error) { return tensorfile.CreateNPY(path, dlpack.Float32, []int64{2}) },
			func() (*tensorfile.File, error) {
				return tensorfile.CreateSafetensors(path, []tensorfile.Spec{{Name: "x", DType: dlpack.Int8}}, nil)
			},
		} {
			f, err := create()
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != c.want {
				t.Fatalf("before %v: mode %v, want %v (%v)", c.before, st.Mode().Perm(), c.want, err)
			}
		}
	}
}
