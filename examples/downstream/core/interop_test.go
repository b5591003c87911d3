package downstream_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"example.com/downstream/cprod"
	"example.com/downstream/mixed"
	"example.com/downstream/theirs"
	"github.com/godlpack/dlpack"
)

// TestMain fails the run if any tensor of either C library, any export or
// any C block of package dlpack outlives the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	clean := func() bool {
		return dlpack.Outstanding() == 0 && dlpack.ReadStats().CBlocks == 0 && cprod.Live() == 0 && theirs.Live() == 0
	}
	for deadline := time.Now().Add(5 * time.Second); !clean() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if !clean() {
		fmt.Fprintf(os.Stderr, "FAIL: left behind: exports %d, dlpack C blocks %d, cprod tensors %d, theirs tensors %d\n",
			dlpack.Outstanding(), dlpack.ReadStats().CBlocks, cprod.Live(), theirs.Live())
		code = 1
	}
	os.Exit(code)
}

func TestImportFromC(t *testing.T) {
	f, err := dlpack.Import(cprod.Arange(2, 3), dlpack.RequireDataType(dlpack.Float64), dlpack.RequireNDim(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.Shape(), f.Strides()); got != "[2 3] [1 2]" {
		t.Fatalf("shape and strides %s, want [2 3] [1 2]", got)
	}
	v, err := dlpack.ViewOf[float64](f)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		for j := 0; j < 3; j++ {
			if x, err := v.At(i, j); err != nil || x != float64(i*3+j) {
				t.Fatalf("At(%d, %d) = %v, %v; want %d", i, j, x, err, i*3+j)
			}
		}
	}
	if cprod.Live() != 1 {
		t.Fatalf("cprod.Live() = %d before Close, want 1", cprod.Live())
	}
	f.Close()
	if cprod.Live() != 0 {
		t.Fatalf("cprod.Live() = %d after Close, want 0", cprod.Live())
	}
}

func TestExportToC(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6}
	for _, opts := range [][]dlpack.ExportOption{nil, {dlpack.WithStrides(1, 2)}, {dlpack.ReadOnly()}} {
		m, err := dlpack.Export(xs, []int64{2, 3}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := cprod.Sum(m); got != 21 {
			t.Fatalf("C sum of the export (options %v) = %v, want 21", opts, got)
		}
	}
	m32, err := dlpack.Export([]float32{0.5, 0.25}, []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	if got := cprod.Sum(m32); got != 0.75 {
		t.Fatalf("C sum of a float32 export = %v, want 0.75", got)
	}
	if n := dlpack.Outstanding(); n != 0 {
		t.Fatalf("Outstanding = %d after C released every export, want 0", n)
	}
}

// A tensor made with the project's own header imports like any other: it
// is read-only and its data starts byte_offset past data.
func TestTheirsToGo(t *testing.T) {
	f, err := dlpack.Import(theirs.Fill(4, 2.5))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Writable() || f.ByteOffset() != 12 || f.Version() != (dlpack.Version{Major: 1, Minor: 1}) {
		t.Fatalf("got %v, byte offset %d, version %v; want read-only, 12, 1.1", f, f.ByteOffset(), f.Version())
	}
	if _, err := dlpack.Slice[float32](f); !errors.Is(err, dlpack.ErrReadOnly) {
		t.Fatalf("Slice of a read-only tensor: %v, want ErrReadOnly", err)
	}
	xs, err := dlpack.ReadOnlySlice[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(xs) != "[2.5 2.5 2.5 2.5]" {
		t.Fatalf("values %v", xs)
	}
}

// Go memory goes to the project's C library through its own C type, and
// the tensor it returns comes back into Go.
func TestGoToTheirsAndBack(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{3}, dlpack.WithStrides(2)) // 1, 3, 5
	if err != nil {
		t.Fatal(err)
	}
	p := theirs.NegateExport(m)
	if dlpack.Outstanding() != 0 {
		t.Fatal("the C library did not release the export")
	}
	f, err := dlpack.Import(p, dlpack.RequireWritable())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ys, err := dlpack.Slice[float32](f)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ys) != "[-1 -3 -5]" || !f.IsCopied() {
		t.Fatalf("got %v (copied %v), want [-1 -3 -5] flagged IS_COPIED", ys, f.IsCopied())
	}
}

// Between two C libraries with different headers (two Go types named
// C.DLManagedTensorVersioned), the pointer crosses as unsafe.Pointer.
func TestBetweenTheTwoCLibraries(t *testing.T) {
	if got := cprod.SumPointer(theirs.Fill(8, 0.5)); got != 4 {
		t.Fatalf("cprod's sum of theirs' tensor = %v, want 4", got)
	}
	// theirs refuses a 2-D float64 tensor from cprod, and still releases it.
	if p := theirs.Negate(cprod.Arange(2, 2)); p != nil {
		t.Fatal("theirs accepted a tensor it cannot read")
	}
	if cprod.Live() != 0 || theirs.Live() != 0 {
		t.Fatalf("left behind: cprod %d, theirs %d", cprod.Live(), theirs.Live())
	}
}

// Both headers in one C file, in each order: the first declares the ABI.
func TestMixedHeaders(t *testing.T) {
	if a, b := mixed.Minors(); a != 1 || b != 3 {
		t.Fatalf("DLPACK_MINOR_VERSION seen with theirs first %d, ours first %d; want 1 and 3", a, b)
	}
	m, err := dlpack.Export(make([]float64, 24), []int64{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mixed.Numels(unsafe.Pointer(m))
	cprod.Sum(m) // releases it
	if a != 24 || b != 24 {
		t.Fatalf("element counts %d and %d, want 24", a, b)
	}
}

// Round trips through both C libraries from several goroutines at once,
// for the race detector and the cgo pointer checks.
func TestConcurrentRoundTrips(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := []float32{float32(g), 1, 2}
			for i := 0; i < 300; i++ {
				m, err := dlpack.Export(xs, []int64{3})
				if err != nil {
					errs <- err
					return
				}
				err = dlpack.Borrow(theirs.NegateExport(m), func(f dlpack.Foreign) error {
					ys, err := dlpack.Slice[float32](f)
					if err == nil && (ys[0] != -float32(g) || ys[2] != -2) {
						err = fmt.Errorf("goroutine %d got %v", g, ys)
					}
					return err
				})
				if err == nil && cprod.SumPointer(cprod.Arange(3, 3)) != 36 {
					err = errors.New("cprod sum of arange(3, 3) is not 36")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Example moves a Go slice into a downstream C library and a C-made tensor
// into Go.
func Example() {
	m, _ := dlpack.Export([]float64{1, 2, 3, 4}, []int64{2, 2})
	fmt.Println("C sums Go memory:", cprod.Sum(m)) // C calls the deleter

	f, _ := dlpack.Import(cprod.Arange(2, 2))
	defer f.Close()
	v, _ := dlpack.ViewOf[float64](f)
	x, _ := v.At(1, 0)
	fmt.Println("Go reads C memory:", f, "at (1, 0):", x)
	// Output:
	// C sums Go memory: 10
	// Go reads C memory: float64[2 2] cpu strides [1 2] at (1, 0): 2
}
