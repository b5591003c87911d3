package tensorfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/godlpack/dlpack"
)

// Spec names a tensor of a file to create: its name, element type and
// shape.
type Spec struct {
	Name  string
	DType dlpack.DataType
	Shape []int64
}

// CreateSafetensors creates the safetensors file path for the tensors of
// specs, zero-filled, and opens it mapped
// read-write: its tensors are writable DLPack producers whose data is the
// file's memory, to be filled in place (dlpack.From(t) and
// dlpack.Slice[float32], a C or Python consumer through dlpack.Produce or
// a capsule; none copies). metadata (may be nil) is the __metadata__.
// Names, metadata and the header's length are checked as WriteSafetensors
// checks them (ErrFormat), before anything is created.
//
// The file is complete from the start: the header is written first, and
// the data section sized. On Linux its blocks are allocated then
// (fallocate), so a file system without room for it (a full /dev/shm)
// fails here with an error wrapping syscall.ENOSPC instead of killing the
// process with SIGBUS at the first write through the mapping; elsewhere
// the file is sparse and that risk remains. The layout and the JSON
// header are WriteSafetensors', the reference writer's, but for the
// padding: spaces until the data starts at a multiple of 64 bytes from
// the file's start, not 8. Another process that maps the file
// (safetensors.safe_open, OpenSafetensors, numpy.memmap) sees what Go
// writes through the shared mapping, page for page, with no copy and
// nothing to flush. Close when done, as for an opened File; os.File.Sync
// or msync are only for durability on disk.
//
// A file already at path is replaced by a rename, never truncated in
// place, so a process still mapping the previous file keeps reading it
// (and does not fault); a path that exists and is not a regular file is
// refused with ErrFormat and left alone; a symbolic link is followed.
func CreateSafetensors(path string, specs []Spec, metadata map[string]string) (*File, error) {
	tensors := make([]stTensor, len(specs))
	for i, s := range specs {
		tensors[i] = stTensor{name: s.Name, dtype: s.DType, shape: s.Shape}
	}
	lay, err := layoutSafetensors(tensors, metadata, 64)
	if err != nil {
		return nil, err
	}
	if err := create(path, lay.head, lay.data); err != nil {
		return nil, err
	}
	f, err := OpenSafetensors(path, ReadWrite())
	if err != nil {
		return nil, fmt.Errorf("tensorfile: reopening the created %s: %w", path, err)
	}
	return f, nil
}

// CreateNPY creates the .npy file path (replacing any file there as
// CreateSafetensors does) for one C-order array of dt and shape,
// zero-filled, and opens it mapped read-write; its one tensor (named "") is a writable DLPack producer to
// fill in place. The header is NumPy's (format 1.0, data at a multiple of
// 64 bytes), so numpy.load(path, mmap_mode="r") and OpenNPY map what Go
// writes, with no copy. Close when done, as for CreateSafetensors.
func CreateNPY(path string, dt dlpack.DataType, shape []int64) (*File, error) {
	descr, err := npyDescr(dt)
	if err != nil {
		return nil, err
	}
	n, _, err := layout("shape", shape, dt.ItemSize(), false)
	if err != nil {
		return nil, err
	}
	if err := create(path, npyPreamble(descr, false, shape), n); err != nil {
		return nil, err
	}
	f, err := OpenNPY(path, ReadWrite())
	if err != nil {
		return nil, fmt.Errorf("tensorfile: reopening the created %s: %w", path, err)
	}
	return f, nil
}

// create writes header and data zero bytes (allocated by reserve) to a
// new file in path's directory and renames it to path. A file already at
// path is replaced, never truncated in place (its permissions are kept):
// a process that still maps it (a reader of the previous version, or this
// one) keeps its pages instead of faulting on them. A symbolic link is
// followed (the link stays a link); a path that exists and is not a
// regular file (a device, a named pipe, a directory) is refused with
// ErrFormat, and on any error whatever was at path is left as it was and
// the temporary file is removed. Temporary files of path that a killed
// writer left, older than OrphanAge, are removed first (see
// RemoveOrphans).
func create(path string, header []byte, data int64) (err error) {
	if data > 1<<62 {
		return fieldErr(ErrLayout, "data size", data, "too large for a file")
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	if err := regular(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	removeOrphans(dir, base, OrphanAge) // best effort: a create does not fail for them
	// The mode is the one an open with O_CREAT gives (0644 less the
	// umask) or, replacing a file, that file's: os.CreateTemp's 0600
	// and a fixed chmod would both differ from what O_TRUNC kept.
	var keep os.FileInfo
	if st, err := os.Stat(path); err == nil {
		keep = st
	}
	var fd *os.File
	for range 100 {
		name := filepath.Join(dir, "."+base+tmpInfix+strconv.FormatUint(rand.Uint64(), 36))
		if fd, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	if keep != nil {
		if err := fd.Chmod(keep.Mode().Perm()); err != nil {
			fd.Close()
			os.Remove(fd.Name())
			return err
		}
	}
	defer func() {
		if err != nil {
			os.Remove(fd.Name())
		}
	}()
	_, err = fd.Write(header)
	if err == nil {
		err = reserve(fd, int64(len(header))+data)
	}
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(fd.Name(), path)
	}
	return err
}

// tmpInfix separates the target's name and the random suffix in the name
// of a temporary file of create: ".NAME.tmp-SUFFIX".
const tmpInfix = ".tmp-"

// OrphanAge is how old a temporary file of CreateNPY or CreateSafetensors
// must be (since its last modification) before a later create of the
// same path removes it as an orphan. A create writes its temporary file
// within one call (the header, then the size reserved) and renames it at
// once: an hour is far beyond that, so a file that old belongs to a
// writer that was killed, not to one still creating.
const OrphanAge = time.Hour

// RemoveOrphans removes from dir the temporary files that CreateNPY and
// CreateSafetensors writers killed during a create left behind
// (".NAME.tmp-SUFFIX", for any NAME), when they were last modified more
// than age ago, and returns their paths. A create already removes those
// of its own path older than OrphanAge; RemoveOrphans serves directories
// whose paths are never created again, or a smaller age when the caller
// knows no writer is running (age 0 removes every such file, live ones
// included). Files of any other name are never touched. It returns the
// first error met, having removed what it could.
func RemoveOrphans(dir string, age time.Duration) ([]string, error) {
	return removeOrphans(dir, "", age)
}

// removeOrphans removes the temporary files in dir of base (of any base
// when base is ""), older than age.
func removeOrphans(dir, base string, age time.Duration) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var first error
	now := time.Now()
	for _, e := range entries {
		if !isTemp(e.Name(), base) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if now.Sub(info.ModTime()) < age {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && first == nil {
				first = err
			}
			continue
		}
		removed = append(removed, p)
	}
	return removed, first
}

// isTemp reports whether name is a temporary file of create for base
// (for any base when base is ""): "." + base + ".tmp-" and a suffix of
// base-36 digits.
func isTemp(name, base string) bool {
	i := strings.LastIndex(name, tmpInfix)
	if i < 2 || name[0] != '.' || (base != "" && name[1:i] != base) {
		return false
	}
	suffix := name[i+len(tmpInfix):]
	if suffix == "" || len(suffix) > 13 { // 2^64-1 is 13 base-36 digits
		return false
	}
	_, err := strconv.ParseUint(suffix, 36, 64)
	return err == nil
}
