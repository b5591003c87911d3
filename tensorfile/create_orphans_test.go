package tensorfile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// dotFiles lists the files of dir whose names start with a dot.
func dotFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name()[0] == '.' {
			names = append(names, e.Name())
		}
	}
	return names
}

// A create removes the temporary files of its own path that a killed
// writer left (older than OrphanAge), and only those: a younger one may
// be another writer's live file, and files of other names are not its
// business. RemoveOrphans removes those of every name.
func TestCreateRemovesOrphans(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * tensorfile.OrphanAge)
	files := map[string]bool{ // name: old
		".x.npy.tmp-3w5e11264sgsf": true,  // an orphan of x.npy
		".x.npy.tmp-1y2p0ij32e8e7": false, // a live writer's
		".y.npy.tmp-2bqcbvt8ix2qm": true,  // an orphan of y.npy
		".x.npy.tmp-not!base36":    true,  // not a name create makes
		".x.npy.tmp-":              true,
		"x.npy.tmp-3w5e11264sgsf":  true,
		".x.npy.keep":              true,
	}
	for name, isOld := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if isOld {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := tensorfile.CreateNPY(filepath.Join(dir, "x.npy"), dlpack.Float32, []int64{4})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	left := dotFiles(t, dir)
	want := []string{".x.npy.keep", ".x.npy.tmp-", ".x.npy.tmp-1y2p0ij32e8e7", ".x.npy.tmp-not!base36", ".y.npy.tmp-2bqcbvt8ix2qm"}
	if !slices.Equal(left, want) {
		t.Fatalf("after CreateNPY: %v, want %v", left, want)
	}
	st, err := tensorfile.CreateSafetensors(filepath.Join(dir, "y.safetensors"), []tensorfile.Spec{{Name: "a", DType: dlpack.Int8, Shape: []int64{2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if left := dotFiles(t, dir); !slices.Equal(left, want) {
		t.Fatalf("a create of another path removed %v", want)
	}
	removed, err := tensorfile.RemoveOrphans(dir, tensorfile.OrphanAge)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{filepath.Join(dir, ".y.npy.tmp-2bqcbvt8ix2qm")}) {
		t.Fatalf("RemoveOrphans removed %v", removed)
	}
	removed, err = tensorfile.RemoveOrphans(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{filepath.Join(dir, ".x.npy.tmp-1y2p0ij32e8e7")}) {
		t.Fatalf("RemoveOrphans(0) removed %v", removed)
	}
	if _, err := tensorfile.RemoveOrphans(filepath.Join(dir, "missing"), 0); err == nil {
		t.Fatal("RemoveOrphans of a missing directory succeeded")
	}
}

// A create that fails after making its temporary file (here the file
// system refuses the size) removes it and leaves the path as it was.
func TestCreateFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.npy")
	if err := os.WriteFile(path, []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tensorfile.CreateNPY(path, dlpack.Uint8, []int64{1 << 61}); err == nil {
		t.Fatal("a create of 2 EiB succeeded")
	}
	if _, err := tensorfile.CreateSafetensors(path, []tensorfile.Spec{{Name: "a", DType: dlpack.Uint8, Shape: []int64{1 << 61}}}, nil); err == nil {
		t.Fatal("a create of 2 EiB succeeded")
	}
	if left := dotFiles(t, dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if b, _ := os.ReadFile(path); string(b) != "before" {
		t.Fatalf("the path now holds %q", b)
	}
}

// A writer killed during a create leaves its temporary file; once it is
// older than OrphanAge, the next create of that path removes it. The
// writer is this test binary, run again as a child that creates the
// file over and over until it is killed (SIGKILL) with a temporary file
// present.
func TestKilledWriterOrphan(t *testing.T) {
	if dir := os.Getenv("TENSORFILE_CREATE_LOOP"); dir != "" {
		for {
			f, err := tensorfile.CreateNPY(filepath.Join(dir, "x.npy"), dlpack.Float32, []int64{16 << 20})
			if err != nil {
				os.Exit(2)
			}
			f.Close()
		}
	}
	dir := t.TempDir()
	var orphans []string
	for try := 0; try < 20 && len(orphans) == 0; try++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterOrphan$")
		cmd.Env = append(os.Environ(), "TENSORFILE_CREATE_LOOP="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(dotFiles(t, dir)) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		orphans = dotFiles(t, dir)
	}
	if len(orphans) == 0 {
		t.Skip("the writer was never killed with its temporary file present")
	}
	t.Logf("the killed writer left %v", orphans)
	// a create soon after leaves it: it could be a live writer's
	f, err := tensorfile.CreateNPY(filepath.Join(dir, "x.npy"), dlpack.Float32, []int64{4})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if left := dotFiles(t, dir); !slices.Equal(left, orphans) {
		t.Fatalf("a create removed a young temporary file: %v left of %v", left, orphans)
	}
	// once it is older than OrphanAge, the next create removes it
	old := time.Now().Add(-tensorfile.OrphanAge - time.Minute)
	for _, name := range orphans {
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = tensorfile.CreateNPY(filepath.Join(dir, "x.npy"), dlpack.Float32, []int64{4}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if left := dotFiles(t, dir); len(left) != 0 {
		t.Fatalf("left after the create: %v", left)
	}
}
