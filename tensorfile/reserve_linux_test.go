package tensorfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// A file larger than its file system's free space is refused at creation
// with an error wrapping ENOSPC, and nothing is left behind. It was
// created sparse, and the first write through the mapping to a page the
// file system could not supply killed the process with SIGBUS (seen on
// a 1 MiB tmpfs; within the free space, fallocate makes the same refusal
// when another writer took the room first).
func TestCreateBeyondFreeSpace(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Skip(err)
	}
	free := int64(st.Bfree) * int64(st.Bsize)
	if free > 1<<50 {
		t.Skipf("%d bytes free", free)
	}
	n := (free + 1<<30) / 4
	path := filepath.Join(dir, "big.npy")
	f, err := tensorfile.CreateNPY(path, dlpack.Float32, []int64{n})
	if f != nil {
		f.Close()
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CreateNPY of %d bytes with %d free: %v, want ENOSPC", 4*n, free, err)
	}
	f, err = tensorfile.CreateSafetensors(path, []tensorfile.Spec{{Name: "x", DType: dlpack.Float32, Shape: []int64{n}}}, nil)
	if f != nil {
		f.Close()
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CreateSafetensors: %v, want ENOSPC", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}
