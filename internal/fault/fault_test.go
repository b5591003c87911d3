//go:build unix

package fault_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack/internal/fault"
	"golang.org/x/sys/unix"
)

// mapTwoPages maps a two-page file and truncates it to one page: the
// second page of the mapping then faults.
func mapTwoPages(t *testing.T) []byte {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 2*page), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	data, err := unix.Mmap(int(fd.Fd()), 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(data) })
	if err := os.Truncate(path, int64(page)); err != nil {
		t.Fatal(err)
	}
	return data
}

var sink byte

func TestGuardTurnsFaultIntoError(t *testing.T) {
	data := mapTwoPages(t)
	page := os.Getpagesize()
	base := uintptr(unsafe.Pointer(&data[0]))
	err := fault.Guard(base, uintptr(len(data)), func() error {
		for _, b := range data {
			sink += b
		}
		return nil
	})
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("want a *fault.Error, got %v", err)
	}
	if fe.Offset != uintptr(page) {
		t.Errorf("fault at byte %d, want %d (the first lost page)", fe.Offset, page)
	}
	// The goroutine's setting is restored.
	if err := fault.Guard(base, uintptr(page), func() error { sink += data[0]; return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestGuardRepanicsOtherFaults(t *testing.T) {
	data := mapTwoPages(t)
	base := uintptr(unsafe.Pointer(&data[0]))
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("a fault outside the range must panic on")
		}
	}()
	// Guarding only the first page: the fault in the second is not ours.
	_ = fault.Guard(base, uintptr(os.Getpagesize()), func() error {
		for _, b := range data {
			sink += b
		}
		return errors.New("unreachable")
	})
}
