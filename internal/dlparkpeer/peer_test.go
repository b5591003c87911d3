//go:build cgo && dlpark

package dlparkpeer_test

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/dlparkpeer"
	"github.com/godlpack/dlpack/internal/leakcheck"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestImportFromDlpark(t *testing.T) {
	f, err := dlpack.Import(dlparkpeer.MakeVersioned(2, 3))
	require.NoError(t, err)
	assert.Equal(t, dlpack.Float32, f.DataType())
	assert.Equal(t, []int64{2, 3}, f.Shape())
	assert.Equal(t, dlpack.Version{Major: 1, Minor: 3}, f.Version())
	xs, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5}, xs)
	assert.Equal(t, int64(1), dlparkpeer.Live())
	f.Close()
	assert.Equal(t, int64(0), dlparkpeer.Live(), "dlpark's deleter ran")

	l, err := dlpack.ImportLegacy(dlparkpeer.MakeLegacy(3, 1), dlpack.AssumeWritable())
	require.NoError(t, err)
	ys, err := dlpack.Slice[float32](l)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2}, ys)
	l.Close()
	assert.Equal(t, int64(0), dlparkpeer.Live())

	err = dlpack.Borrow(dlparkpeer.MakeVersioned(1, 4), func(f dlpack.Foreign) error {
		v, err := dlpack.ViewOf[float32](f)
		if err == nil {
			x, _ := v.At(0, 3)
			assert.Equal(t, float32(3), x)
		}
		return err
	}, dlpack.RequireContiguous())
	require.NoError(t, err)
	assert.Equal(t, int64(0), dlparkpeer.Live())
}

func TestExportToDlpark(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{2, 3})
	require.NoError(t, err)
	assert.Equal(t, 21.0, dlparkpeer.ConsumeSum(unsafe.Pointer(m)))

	ys := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	m, err = dlpack.Export(ys, []int64{3, 2}, dlpack.WithStrides(-4, 1), dlpack.WithOffset(8), dlpack.ReadOnly())
	require.NoError(t, err)
	assert.Equal(t, 8+9+4+5+0+1.0, dlparkpeer.ConsumeSum(unsafe.Pointer(m)), "negative strides, read-only")

	m, err = dlpack.Export([]float32{}, []int64{0, 4})
	require.NoError(t, err)
	assert.Equal(t, 0.0, dlparkpeer.ConsumeSum(unsafe.Pointer(m)), "zero-size")

	b, err := dlpack.NewBuffer[float64]([]int64{2, 2})
	require.NoError(t, err)
	copy(b.Data(), []float64{1, 2, 3, 4})
	m, err = b.Export(nil)
	require.NoError(t, err)
	b.Close()
	assert.Equal(t, 10.0, dlparkpeer.ConsumeSum(unsafe.Pointer(m)), "C-heap buffer")
	assert.Equal(t, int64(0), dlpack.Outstanding(), "dlpark released every export once")
}

func rssKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestSoak: 100,000 round trips each way; the Go heap and the process RSS
// stay flat and nothing is outstanding on either side.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const rounds = 100_000
	xs := make([]float32, 16)
	warm := func() {
		for i := 0; i < 1000; i++ {
			m, _ := dlpack.Export(xs, []int64{4, 4})
			dlparkpeer.ConsumeSum(unsafe.Pointer(m))
			f, _ := dlpack.Import(dlparkpeer.MakeVersioned(4, 4))
			f.Close()
		}
	}
	warm()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rss0 := rssKiB(t)
	for i := 0; i < rounds; i++ {
		m, err := dlpack.Export(xs, []int64{4, 4})
		if err != nil {
			t.Fatal(err)
		}
		if s := dlparkpeer.ConsumeSum(unsafe.Pointer(m)); s != 0 {
			t.Fatal(s)
		}
		f, err := dlpack.Import(dlparkpeer.MakeVersioned(4, 4))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	rss1 := rssKiB(t)
	t.Logf("Go -> dlpark and dlpark -> Go, %d round trips each: heap %d -> %d KiB, RSS %d -> %d KiB",
		rounds, before.HeapAlloc/1024, after.HeapAlloc/1024, rss0, rss1)
	assert.Equal(t, int64(0), dlpack.Outstanding())
	assert.Equal(t, int64(0), dlparkpeer.Live())
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(1<<20), "Go heap flat")
	assert.Less(t, rss1-rss0, int64(8*1024), "RSS flat (within 8 MiB)")
}

// every element type, both ways, compared byte for byte
func roundTrip[T dlpack.Element](t *testing.T, xs []T) {
	t.Helper()
	dt := dlpack.DataTypeOf[T]()
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*int(unsafe.Sizeof(xs[0])))
	m, err := dlpack.Export(xs, []int64{int64(len(xs))})
	require.NoError(t, err)
	assert.Equal(t, raw, dlparkpeer.CopyBytes(unsafe.Pointer(m), len(raw)), "Go -> dlpark %v", dt)

	f, err := dlpack.Import(dlparkpeer.MakeBytes(dt, int64(len(xs)), raw))
	require.NoError(t, err, "dlpark -> Go %v", dt)
	ys, err := dlpack.Slice[T](f)
	require.NoError(t, err)
	assert.Equal(t, xs, ys, "dlpark -> Go %v", dt)
	f.Close()
}

func TestEveryDataTypeBothWays(t *testing.T) {
	roundTrip(t, []bool{true, false, true})
	roundTrip(t, []int8{-128, 0, 127})
	roundTrip(t, []int16{-32768, 1, 32767})
	roundTrip(t, []int32{-1 << 31, 2, 1<<31 - 1})
	roundTrip(t, []int64{-1 << 63, 3, 1<<63 - 1})
	roundTrip(t, []uint8{0, 1, 255})
	roundTrip(t, []uint16{0, 2, 65535})
	roundTrip(t, []uint32{0, 3, 1<<32 - 1})
	roundTrip(t, []uint64{0, 4, 1<<64 - 1})
	roundTrip(t, []float32{-1.5, 0, float32(math.Inf(1))})
	roundTrip(t, []float64{-2.25, math.SmallestNonzeroFloat64, math.MaxFloat64})
	roundTrip(t, []complex64{1 + 2i, -3i})
	roundTrip(t, []complex128{1e300 - 1e-300i, 0})
	roundTrip(t, []minifloat.Float16{0x3c00, 0x7bff, 0x0001})
	roundTrip(t, []minifloat.BFloat16{0x3f80, 0xc049, 0x7f80})
	roundTrip(t, []minifloat.E4M3FN{0x38, 0x7e, 0x01})
	roundTrip(t, []minifloat.E5M2{0x3c, 0x7b, 0x7c})
	assert.Equal(t, int64(0), dlparkpeer.Live())
	assert.Equal(t, int64(0), dlpack.Outstanding())
}
