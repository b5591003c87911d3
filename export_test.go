//go:build cgo

package dlpack_test

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/godlpack/dlpack/minifloat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireNoOutstanding checks the export counter is back where it started.
func requireNoOutstanding(t *testing.T) {
	t.Helper()
	require.Equal(t, int64(0), dlpack.Outstanding(), "every export released")
}

func TestExportVersioned(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{2, 3})
	require.NoError(t, err)
	assert.Equal(t, int64(1), dlpack.Outstanding())
	assert.Equal(t, dlpack.CurrentVersion, m.Version)
	assert.Equal(t, dlpack.Flags(0), m.Flags)
	assert.NotZero(t, m.Deleter)
	assert.NotZero(t, m.ManagerCtx, "manager_ctx carries the handle")
	tt := m.DLTensor
	assert.Equal(t, uintptr(unsafe.Pointer(&xs[0])), tt.Data, "zero copy: data is the Go slice")
	assert.Equal(t, dlpack.CPUDevice, tt.Device)
	assert.Equal(t, int32(2), tt.NDim)
	assert.Equal(t, dlpack.Float32, tt.DType)
	assert.Equal(t, []int64{2, 3}, unsafe.Slice(tt.Shape, 2))
	require.NotNil(t, tt.Strides, "strides are always sent")
	assert.Equal(t, []int64{3, 1}, unsafe.Slice(tt.Strides, 2))
	assert.Equal(t, uint64(0), tt.ByteOffset)

	assert.Equal(t, 21.0, cshim.SumVersioned(unsafe.Pointer(m)))
	xs[0] = 100 // the consumer sees Go's memory
	assert.Equal(t, 120.0, cshim.SumVersioned(unsafe.Pointer(m)))
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	requireNoOutstanding(t)
}

func TestExportLegacy(t *testing.T) {
	xs := []float64{1.5, 2.5}
	m, err := dlpack.ExportLegacy(xs, []int64{2})
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, unsafe.Slice(m.DLTensor.Strides, 1))
	assert.Equal(t, 4.0, cshim.SumLegacy(unsafe.Pointer(m)))
	cshim.ReleaseLegacy(unsafe.Pointer(m))
	requireNoOutstanding(t)

	_, err = dlpack.ExportLegacy(xs, []int64{2}, dlpack.ReadOnly())
	require.ErrorIs(t, err, dlpack.ErrReadOnly, "legacy tensors cannot carry READ_ONLY")
	requireNoOutstanding(t)
}

func TestExportStridedWithOffset(t *testing.T) {
	xs := make([]float64, 12)
	for i := range xs {
		xs[i] = float64(i)
	}
	// Elements 10, 8, 6 (a reversed step slice), each broadcast twice.
	m, err := dlpack.Export(xs, []int64{3, 2}, dlpack.WithStrides(-2, 0), dlpack.WithOffset(10))
	require.NoError(t, err)
	assert.Equal(t, uintptr(unsafe.Pointer(&xs[10])), m.DLTensor.Data)
	assert.Equal(t, 48.0, cshim.SumVersioned(unsafe.Pointer(m)))
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	requireNoOutstanding(t)
}

func TestExportRejectsBadGeometry(t *testing.T) {
	xs := make([]float32, 6)
	cases := []struct {
		name  string
		shape []int64
		opts  []dlpack.ExportOption
		err   error
	}{
		{"too many elements", []int64{2, 4}, nil, dlpack.ErrShape},
		{"negative dimension", []int64{-1, 2}, nil, dlpack.ErrShape},
		{"strides of the wrong length", []int64{2, 3}, []dlpack.ExportOption{dlpack.WithStrides(1)}, dlpack.ErrStrides},
		{"strides reaching past the end", []int64{2, 3}, []dlpack.ExportOption{dlpack.WithStrides(4, 1)}, dlpack.ErrShape},
		{"negative stride below the start", []int64{3}, []dlpack.ExportOption{dlpack.WithStrides(-1)}, dlpack.ErrShape},
		{"offset past the end", []int64{1}, []dlpack.ExportOption{dlpack.WithOffset(6)}, dlpack.ErrShape},
		{"negative offset", []int64{1}, []dlpack.ExportOption{dlpack.WithOffset(-1)}, dlpack.ErrShape},
		{"ndim above 64", make([]int64, 65), nil, dlpack.ErrNDim},
		{"extent overflow", []int64{3}, []dlpack.ExportOption{dlpack.WithStrides(1 << 62)}, dlpack.ErrOverflow},
	}
	for _, c := range cases {
		_, err := dlpack.Export(xs, c.shape, c.opts...)
		require.ErrorIs(t, err, c.err, c.name)
		var fe *dlpack.FieldError
		require.ErrorAs(t, err, &fe, c.name)
		assert.NotEmpty(t, fe.Field)
	}
	requireNoOutstanding(t)
}

func TestExportEmptyAndScalar(t *testing.T) {
	m, err := dlpack.Export([]int32{}, []int64{0, 3})
	require.NoError(t, err)
	assert.NotZero(t, m.DLTensor.Data, "empty tensors get a valid non-NULL pointer")
	assert.Equal(t, uintptr(0), m.DLTensor.Data%256)
	cshim.ReleaseVersioned(unsafe.Pointer(m))

	m, err = dlpack.Export([]float64{42}, nil)
	require.NoError(t, err)
	assert.Equal(t, int32(0), m.DLTensor.NDim)
	assert.Equal(t, 42.0, cshim.SumVersioned(unsafe.Pointer(m)))
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	requireNoOutstanding(t)
}

func TestExportEveryElementType(t *testing.T) {
	check := func(m *dlpack.ManagedTensorVersioned, err error, dt dlpack.DataType) {
		require.NoError(t, err)
		assert.Equal(t, dt, m.DLTensor.DType)
		f, err := dlpack.Import(unsafe.Pointer(m))
		require.NoError(t, err)
		assert.Equal(t, dt, f.DataType())
		f.Close()
	}
	m, err := dlpack.Export([]int8{1}, []int64{1})
	check(m, err, dlpack.Int8)
	m, err = dlpack.Export([]int16{1}, []int64{1})
	check(m, err, dlpack.Int16)
	m, err = dlpack.Export([]int32{1}, []int64{1})
	check(m, err, dlpack.Int32)
	m, err = dlpack.Export([]int64{1}, []int64{1})
	check(m, err, dlpack.Int64)
	m, err = dlpack.Export([]uint8{1}, []int64{1})
	check(m, err, dlpack.Uint8)
	m, err = dlpack.Export([]uint16{1}, []int64{1})
	check(m, err, dlpack.Uint16)
	m, err = dlpack.Export([]uint32{1}, []int64{1})
	check(m, err, dlpack.Uint32)
	m, err = dlpack.Export([]uint64{1}, []int64{1})
	check(m, err, dlpack.Uint64)
	m, err = dlpack.Export([]float32{1}, []int64{1})
	check(m, err, dlpack.Float32)
	m, err = dlpack.Export([]float64{1}, []int64{1})
	check(m, err, dlpack.Float64)
	m, err = dlpack.Export([]complex64{1}, []int64{1})
	check(m, err, dlpack.Complex64)
	m, err = dlpack.Export([]complex128{1}, []int64{1})
	check(m, err, dlpack.Complex128)
	m, err = dlpack.Export([]bool{true}, []int64{1})
	check(m, err, dlpack.Bool)
	m, err = dlpack.Export([]minifloat.Float16{0x3c00}, []int64{1})
	check(m, err, dlpack.Float16)
	m, err = dlpack.Export([]minifloat.BFloat16{0x3f80}, []int64{1})
	check(m, err, dlpack.BFloat16)
	m, err = dlpack.Export([]minifloat.E4M3FN{0x38}, []int64{1})
	check(m, err, dlpack.Float8E4M3FN)
	m, err = dlpack.Export([]minifloat.E5M2{0x3c}, []int64{1})
	check(m, err, dlpack.Float8E5M2)
	requireNoOutstanding(t)
}

// TestExportSurvivesGC: while C holds the export, the Go slice is
// unreachable from Go; many GC cycles and allocation churn must not move
// or free it (checked by content).
func TestExportSurvivesGC(t *testing.T) {
	var ms []*dlpack.ManagedTensorVersioned
	for i := 0; i < 64; i++ {
		xs := make([]float64, 1000)
		for j := range xs {
			xs[j] = float64(i)
		}
		m, err := dlpack.Export(xs, []int64{1000})
		require.NoError(t, err)
		ms = append(ms, m)
	}
	var junk [][]byte
	for round := 0; round < 10; round++ {
		for k := 0; k < 1000; k++ {
			junk = append(junk, make([]byte, 1024))
		}
		junk = junk[:0]
		runtime.GC()
	}
	for i, m := range ms {
		require.Equal(t, float64(1000*i), cshim.SumVersioned(unsafe.Pointer(m)), "export %d intact", i)
		cshim.ReleaseVersioned(unsafe.Pointer(m))
	}
	requireNoOutstanding(t)
}

// TestReleaseFromForeignThreads: deleters called from pthreads created in
// C, each exiting right after its share.
func TestReleaseFromForeignThreads(t *testing.T) {
	const n = 2000
	xs := make([]float32, 16)
	ptrs := make([]unsafe.Pointer, 0, n)
	legacyPtrs := make([]unsafe.Pointer, 0, n)
	for i := 0; i < n; i++ {
		m, err := dlpack.Export(xs, []int64{4, 4})
		require.NoError(t, err)
		ptrs = append(ptrs, unsafe.Pointer(m))
		l, err := dlpack.ExportLegacy(xs, []int64{16})
		require.NoError(t, err)
		legacyPtrs = append(legacyPtrs, unsafe.Pointer(l))
	}
	assert.Equal(t, int64(2*n), dlpack.Outstanding())
	cshim.ReleaseOnThreads(ptrs, 8, false)
	cshim.ReleaseOnThreads(legacyPtrs, 8, true)
	requireNoOutstanding(t)
}

func TestConcurrentExportRelease(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := []float32{1, 2, 3}
			for i := 0; i < 500; i++ {
				m, err := dlpack.Export(xs, []int64{3})
				if err != nil {
					t.Error(err)
					return
				}
				if s := cshim.SumVersioned(unsafe.Pointer(m)); s != 6 {
					t.Errorf("sum %v", s)
				}
				cshim.ReleaseVersioned(unsafe.Pointer(m))
			}
		}()
	}
	wg.Wait()
	requireNoOutstanding(t)
}

func TestGoToGo(t *testing.T) {
	xs := []int32{1, 2, 3, 4, 5, 6}
	m, err := dlpack.Export(xs, []int64{3, 2})
	require.NoError(t, err)
	f, err := dlpack.Import(unsafe.Pointer(m))
	require.NoError(t, err)
	ys, err := dlpack.Slice[int32](f)
	require.NoError(t, err)
	assert.Equal(t, xs, ys)
	ys[0] = 99
	assert.Equal(t, int32(99), xs[0], "same memory, no copy")
	assert.Equal(t, unsafe.Pointer(&xs[0]), unsafe.Pointer(&ys[0]))
	require.NoError(t, f.Close())
	requireNoOutstanding(t)

	// A strided, reversed export viewed back.
	m, err = dlpack.Export(xs, []int64{3}, dlpack.WithStrides(-2), dlpack.WithOffset(4), dlpack.ReadOnly())
	require.NoError(t, err)
	f, err = dlpack.Import(unsafe.Pointer(m))
	require.NoError(t, err)
	assert.False(t, f.Writable())
	v, err := dlpack.ViewOf[int32](f)
	require.NoError(t, err)
	got := make([]int32, 3)
	_, err = v.CopyTo(got)
	require.NoError(t, err)
	assert.Equal(t, []int32{5, 3, 99}, got)
	assert.ErrorIs(t, v.Set(0, 0), dlpack.ErrReadOnly)
	f.Close()

	l, err := dlpack.ExportLegacy(xs, []int64{6})
	require.NoError(t, err)
	err = dlpack.BorrowLegacy(unsafe.Pointer(l), func(f dlpack.Foreign) error {
		zs, err := dlpack.Slice[int32](f)
		if err == nil {
			zs[5] = -6
		}
		return err
	}, dlpack.AssumeWritable())
	require.NoError(t, err)
	assert.Equal(t, int32(-6), xs[5])
	requireNoOutstanding(t)
}

func TestBufferExport(t *testing.T) {
	b, err := dlpack.NewBuffer[float64]([]int64{2, 3})
	require.NoError(t, err)
	data := b.Data()
	require.Len(t, data, 6)
	assert.Equal(t, uintptr(0), uintptr(unsafe.Pointer(&data[0]))%256, "buffers are 256-byte aligned")
	assert.Equal(t, []int64{2, 3}, b.Shape())
	for i := range data {
		data[i] = float64(i + 1)
	}
	m, err := b.Export(nil)
	require.NoError(t, err)
	col, err := b.Export([]int64{2}, dlpack.WithStrides(3), dlpack.WithOffset(2)) // last column
	require.NoError(t, err)
	assert.Equal(t, int64(2), dlpack.Outstanding())
	require.NoError(t, b.Close())
	assert.Nil(t, b.Data())
	_, err = b.Export(nil)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
	// The consumers still hold the memory after Close.
	assert.Equal(t, 21.0, cshim.SumVersioned(unsafe.Pointer(m)))
	assert.Equal(t, 9.0, cshim.SumVersioned(unsafe.Pointer(col)))
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	// Import of a buffer export: plain C memory.
	f, err := dlpack.Import(unsafe.Pointer(col))
	require.NoError(t, err)
	v, err := dlpack.ViewOf[float64](f)
	require.NoError(t, err)
	x, err := v.At(1)
	require.NoError(t, err)
	assert.Equal(t, 6.0, x)
	f.Close()
	requireNoOutstanding(t)
	require.NoError(t, b.Close(), "Close is idempotent")

	lb, err := dlpack.NewBuffer[int16]([]int64{4})
	require.NoError(t, err)
	l, err := lb.ExportLegacy(nil)
	require.NoError(t, err)
	lb.Close()
	cshim.ReleaseOnThreads([]unsafe.Pointer{unsafe.Pointer(l)}, 1, true)
	requireNoOutstanding(t)

	_, err = dlpack.NewBuffer[float32]([]int64{-1})
	assert.ErrorIs(t, err, dlpack.ErrShape)
	_, err = dlpack.NewBuffer[float64]([]int64{1 << 40, 1 << 40})
	assert.ErrorIs(t, err, dlpack.ErrOverflow)
}

// TestDeleterRefusesForeignStructs: the package's deleter checks the hidden
// prefix it wrote and refuses (counts) a struct it did not make.
func TestDeleterRefusesForeignStructs(t *testing.T) {
	m, err := dlpack.Export([]float32{1}, []int64{1})
	require.NoError(t, err)
	const prefix = 24 // handle, generation, magic
	fake := cshim.FakeBlock(prefix + int(unsafe.Sizeof(dlpack.ManagedTensorVersioned{})))
	fm := (*dlpack.ManagedTensorVersioned)(ptrAdd(fake, prefix))
	fm.Deleter = m.Deleter
	fm.ManagerCtx = m.ManagerCtx // a consumer cannot redirect the release through manager_ctx
	before := dlpack.ReadStats().BadReleases
	cshim.ReleaseVersioned(unsafe.Pointer(fm))
	assert.Equal(t, before+1, dlpack.ReadStats().BadReleases)
	assert.Equal(t, int64(1), dlpack.Outstanding(), "the real export is untouched")
	cshim.FreeBlock(fake)
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	requireNoOutstanding(t)
}

// TestReducedPrecisionRoundTrip: bfloat16 values written in Go, exported,
// imported back and read as minifloat values and as float32.
func TestReducedPrecisionRoundTrip(t *testing.T) {
	in := []float32{1, -2.5, 3.140625, 0}
	xs := make([]minifloat.BFloat16, len(in))
	for i, x := range in {
		xs[i] = minifloat.BFloat16From32(x)
	}
	m, err := dlpack.Export(xs, []int64{2, 2})
	require.NoError(t, err)
	err = dlpack.Borrow(unsafe.Pointer(m), func(f dlpack.Foreign) error {
		assert.Equal(t, "bfloat16[2 2] cpu strides [2 1]", f.String())
		ys, err := dlpack.Slice[minifloat.BFloat16](f)
		require.NoError(t, err)
		for i, y := range ys {
			assert.Equal(t, in[i], y.Float32())
		}
		_, err = dlpack.Slice[minifloat.Float16](f)
		assert.ErrorIs(t, err, dlpack.ErrTypeMismatch, "same size, different format")
		return nil
	})
	require.NoError(t, err)
	requireNoOutstanding(t)
}

// TestExportBlocks: an export's C block is its record's own block, reused
// by the record's next export and never freed by the deleter; exports of
// more dimensions than a kept block holds get a one-off block that their
// deleter frees. A repeated deleter call on a released kept block is
// refused and counted, and frees nothing. CBlocks counts the blocks in use.
func TestExportBlocks(t *testing.T) {
	xs := make([]float64, 1<<10)
	base := dlpack.ReadStats()

	m1, err := dlpack.Export(xs, []int64{32, 32})
	require.NoError(t, err)
	during := dlpack.ReadStats()
	assert.Equal(t, base.CBlocks+1, during.CBlocks, "the block in use is counted")
	cshim.ReleaseVersioned(unsafe.Pointer(m1))
	after := dlpack.ReadStats()
	assert.Equal(t, base.CBlocks, after.CBlocks)
	assert.GreaterOrEqual(t, after.KeptBlocks, int64(1), "the block stays with its record")

	// The next export usually reuses that record and block (unless the
	// goroutine moved to another P in between); either way it is whole.
	m2, err := dlpack.Export(xs, []int64{4, 256})
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 256}, unsafe.Slice(m2.DLTensor.Shape, 2))
	cshim.ReleaseVersioned(unsafe.Pointer(m2))
	bad := dlpack.ReadStats().BadReleases
	cshim.ReleaseVersioned(unsafe.Pointer(m2)) // a second deleter call: refused, nothing freed
	assert.Equal(t, bad+1, dlpack.ReadStats().BadReleases)
	assert.Equal(t, base.CBlocks, dlpack.ReadStats().CBlocks)

	// Nine dimensions: a one-off block, freed by the deleter.
	shape9 := []int64{2, 2, 2, 2, 2, 2, 2, 2, 4}
	m9, err := dlpack.Export(xs, shape9)
	require.NoError(t, err)
	assert.Equal(t, shape9, unsafe.Slice(m9.DLTensor.Shape, 9))
	assert.Equal(t, base.CBlocks+1, dlpack.ReadStats().CBlocks)
	assert.InDelta(t, 0.0, cshim.SumVersioned(unsafe.Pointer(m9)), 0)
	cshim.ReleaseVersioned(unsafe.Pointer(m9))
	assert.Equal(t, base.CBlocks, dlpack.ReadStats().CBlocks)
	requireNoOutstanding(t)

	// Refused exports give back what they took.
	_, err = dlpack.Export(xs, []int64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2048})
	require.ErrorIs(t, err, dlpack.ErrShape)
	_, err = dlpack.Export(xs, []int64{2048})
	require.ErrorIs(t, err, dlpack.ErrShape)
	assert.Equal(t, base.CBlocks, dlpack.ReadStats().CBlocks)
	requireNoOutstanding(t)
}

// TestExportIntoGarbageBlocks: a fresh C block holds whatever malloc left
// there. Filling it must not let the GC's write barrier inspect those old
// words as pointers: here they are Go's own dead-pointer poison, which the
// GC aborts on, and the exports run while a collection is always under way.
func TestExportIntoGarbageBlocks(t *testing.T) {
	xs := make([]float32, 512)
	shape9 := []int64{2, 2, 2, 2, 2, 2, 2, 2, 2} // more than a kept block holds: a fresh malloc each time
	const block9 = 24 + 80 + 16*9                // prefix, versioned struct, shape and strides
	// A heap of many pointers keeps each collection's mark phase, when the
	// write barrier is on, long.
	type node struct{ next *node }
	heap := make([]*node, 1<<20)
	for i := range heap {
		heap[i] = &node{}
		if i > 0 {
			heap[i].next = heap[i-1]
		}
	}
	defer runtime.KeepAlive(heap)
	stopGC := collectBackToBack()
	for range 20000 {
		cshim.PoisonFree(block9)
		m, err := dlpack.Export(xs, shape9)
		require.NoError(t, err)
		cshim.ReleaseVersioned(unsafe.Pointer(m))
	}
	stopGC()
	requireNoOutstanding(t)
}

// TestExportBurstBeyondFreeList: more exports outstanding at once than a
// shard keeps records for. When they are released, the surplus records
// are dropped and their C blocks freed; nothing leaks and the kept blocks
// stay bounded.
func TestExportBurstBeyondFreeList(t *testing.T) {
	const n = 16*4096 + 1000 // above the 4,096 records each of the 16 shards keeps
	xs := make([]float32, 4)
	ms := make([]unsafe.Pointer, 0, n)
	before := dlpack.ReadStats()
	for range n {
		m, err := dlpack.Export(xs, []int64{2, 2})
		require.NoError(t, err)
		ms = append(ms, unsafe.Pointer(m))
	}
	assert.Equal(t, before.CBlocks+n, dlpack.ReadStats().CBlocks)
	cshim.ReleaseOnThreads(ms, 4, false)
	after := dlpack.ReadStats()
	requireNoOutstanding(t)
	assert.Equal(t, before.CBlocks, after.CBlocks)
	// Per shard: the free list (4,096), the hot slot and the 8-slot reuse
	// ring; 16 shards. The bound ReleaseIdle documents: 65,680.
	assert.LessOrEqual(t, after.KeptBlocks, int64(16*(4096+1+8)), "surplus blocks were freed")
	assert.Greater(t, after.KeptBlocks, int64(0))
}

// TestImmediateDoubleReleaseCaught: a consumer that calls a deleter twice,
// with other exports made and released in between, is refused and counted:
// a released record waits for reuseDelay releases of its shard before its
// block serves another export, so the second call cannot release a newer
// export.
func TestImmediateDoubleReleaseCaught(t *testing.T) {
	xs := make([]float32, 4)
	m, err := dlpack.Export(xs, []int64{4})
	require.NoError(t, err)
	cshim.ReleaseVersioned(unsafe.Pointer(m))
	var newer []*dlpack.ManagedTensorVersioned
	for i := 0; i < 7; i++ { // released ones go through the ring too
		n, err := dlpack.Export(xs, []int64{4})
		require.NoError(t, err)
		require.NotEqual(t, m, n, "a released block served a new export at once")
		if i%2 == 0 {
			cshim.ReleaseVersioned(unsafe.Pointer(n))
		} else {
			newer = append(newer, n)
		}
	}
	out, bad := dlpack.Outstanding(), dlpack.ReadStats().BadReleases
	cshim.ReleaseVersioned(unsafe.Pointer(m)) // the consumer's bug
	assert.Equal(t, bad+1, dlpack.ReadStats().BadReleases)
	assert.Equal(t, out, dlpack.Outstanding(), "no newer export was released")
	for _, n := range newer {
		cshim.ReleaseVersioned(unsafe.Pointer(n))
	}
	assert.Zero(t, dlpack.Outstanding())
}

// What Export and ExportLegacy return is released from Go by its own
// Close, and a second Close of our export is refused and counted.
func TestExportClose(t *testing.T) {
	m, err := dlpack.Export([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	require.NoError(t, err)
	require.Equal(t, int64(1), dlpack.Outstanding())
	require.NoError(t, m.Close())
	requireNoOutstanding(t)
	before := dlpack.ReadStats().BadReleases
	require.NoError(t, m.Close())
	assert.Equal(t, before+1, dlpack.ReadStats().BadReleases, "a second Close is refused, not a double free")

	l, err := dlpack.ExportLegacy([]int32{1, 2}, []int64{2})
	require.NoError(t, err)
	require.Equal(t, int64(1), dlpack.Outstanding())
	require.NoError(t, l.Close())
	requireNoOutstanding(t)

	var none *dlpack.ManagedTensorVersioned
	require.NoError(t, none.Close())
	require.NoError(t, dlpack.Managed{}.Close())
}
