package tensorfile_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

func f64npy(n int) []byte {
	data := make([]byte, 8*n)
	for i := range n {
		*(*float64)(unsafe.Pointer(&data[8*i])) = float64(i)
	}
	return npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': ("+itoa(n)+",), }", data)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// A description holds the mapping after Close until its ReleaseTensor;
// then the file is unmapped exactly once.
func TestMappingOutlivesCloseUntilRelease(t *testing.T) {
	noLiveMappings(t)
	p := writeTemp(t, "a.npy", f64npy(6))
	f, err := tensorfile.OpenNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	live, unmaps := tensorfile.LiveMappings(), tensorfile.Unmaps()
	addr, size := f.MappedRange()
	tn := f.Tensors()[0]
	var d dlpack.Description
	if err := tn.DescribeTensor(&d); err != nil {
		t.Fatal(err)
	}
	if a := uintptr(d.Data); a < addr || a+d.Size > addr+uintptr(size) || d.Size != 48 || !d.ReadOnly || d.DType != dlpack.Float64 {
		t.Fatalf("description %+v outside the mapping [%#x, +%d)", d, addr, size)
	}
	if got := unsafe.Slice((*float64)(d.Data), 6); got[5] != 5 {
		t.Fatalf("data %v", got)
	}
	f.Close()
	f.Close()
	if tensorfile.LiveMappings() != live || tensorfile.Unmaps() != unmaps {
		t.Fatal("unmapped while a description is outstanding")
	}
	if err := tn.DescribeTensor(&dlpack.Description{}); !errors.Is(err, dlpack.ErrClosed) {
		t.Fatalf("describe after Close: %v", err)
	}
	if got := unsafe.Slice((*float64)(d.Data), 6); got[3] != 3 {
		t.Fatalf("data after Close %v", got)
	}
	d.Owner.(dlpack.Releaser).ReleaseTensor()
	if tensorfile.LiveMappings() != live-1 || tensorfile.Unmaps() != unmaps+1 {
		t.Fatalf("not unmapped exactly once: live %d, unmaps %d", tensorfile.LiveMappings()-live, tensorfile.Unmaps()-unmaps)
	}
}

// Descriptions released from many goroutines while the file is closed
// concurrently: one unmap, after the last.
func TestConcurrentReleases(t *testing.T) {
	noLiveMappings(t)
	p := writeTemp(t, "a.npy", f64npy(1000))
	for range 20 {
		unmaps := tensorfile.Unmaps()
		f, err := tensorfile.OpenNPY(p)
		if err != nil {
			t.Fatal(err)
		}
		tn := f.Tensors()[0]
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					var d dlpack.Description
					if err := tn.DescribeTensor(&d); err != nil {
						if !errors.Is(err, dlpack.ErrClosed) {
							t.Error(err)
						}
						return
					}
					if x := unsafe.Slice((*float64)(d.Data), 1000)[999]; x != 999 {
						t.Errorf("read %v", x)
					}
					d.Owner.(dlpack.Releaser).ReleaseTensor()
				}
				if g == 7 {
					f.Close()
				}
			}()
		}
		wg.Wait()
		f.Close()
		if tensorfile.Unmaps() != unmaps+1 {
			t.Fatalf("%d unmaps", tensorfile.Unmaps()-unmaps)
		}
	}
}

// A Foreign from dlpack.From that is never closed is released by its
// cleanup, and the mapping with it.
func TestUnclosedExportReleasedByCleanup(t *testing.T) {
	noLiveMappings(t)
	p := writeTemp(t, "a.npy", f64npy(6))
	f, err := tensorfile.OpenNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	live := tensorfile.LiveMappings()
	func() {
		x, err := dlpack.From(f.Tensors()[0])
		if err != nil {
			t.Fatal(err)
		}
		_ = x // dropped without Close
	}()
	f.Close()
	for deadline := time.Now().Add(5 * time.Second); tensorfile.LiveMappings() == live && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if tensorfile.LiveMappings() != live-1 {
		t.Fatal("the unclosed export kept the file mapped")
	}
}
