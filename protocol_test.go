//go:build cgo

package dlpack_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
)

// countingSource is a Source over a Go slice whose owner counts releases.
type countingSource struct {
	data     []float64
	shape    []int64
	strides  []int64
	offset   uint64
	readOnly bool
	size     uintptr // 0: the slice's byte length
	own      *countingOwner
}

type countingOwner struct{ released atomic.Int64 }

func (o *countingOwner) ReleaseTensor() { o.released.Add(1) }

func (s *countingSource) DescribeTensor(d *dlpack.Description) error {
	dlpack.DescribeSlice(d, s.data)
	if s.size != 0 {
		d.Size = s.size
	}
	d.Shape, d.Strides, d.ByteOffset, d.ReadOnly, d.Owner = s.shape, s.strides, s.offset, s.readOnly, s.own
	return nil
}
func (s *countingSource) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }
func (s *countingSource) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(s, req)
}

func newCounting(n int, shape ...int64) *countingSource {
	data := make([]float64, n)
	for i := range data {
		data[i] = float64(i)
	}
	return &countingSource{data: data, shape: shape, own: new(countingOwner)}
}

func TestFromArrayGoToGo(t *testing.T) {
	xs := []float32{1, 2, 3, 4, 5, 6}
	a := dlpack.NewArray(xs, []int64{2, 3})
	f, err := dlpack.From(a)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, f.Shape())
	assert.Equal(t, []int64{3, 1}, f.Strides())
	assert.Equal(t, dlpack.Float32, f.DataType())
	assert.Equal(t, dlpack.CPUDevice, f.Device())
	assert.True(t, f.Writable())
	got, err := dlpack.Slice[float32](f)
	require.NoError(t, err)
	got[0] = 10
	assert.Equal(t, float32(10), xs[0], "Go to Go shares the memory")
	assert.Zero(t, dlpack.Outstanding(), "no export record for a Go-to-Go import")
	require.NoError(t, f.Close())
	assert.ErrorIs(t, f.Err(), dlpack.ErrClosed)
}

func TestFromArrayNoAllocs(t *testing.T) {
	a := dlpack.NewArray(make([]float32, 1024), []int64{32, 32})
	allocs := testing.AllocsPerRun(1000, func() {
		f, err := dlpack.From(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dlpack.Slice[float32](f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	})
	assert.LessOrEqual(t, allocs, 3.0)
}

func TestFromArrayStridedOffsetReadOnly(t *testing.T) {
	data := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	// Every other column of a 3x4 matrix, read backwards by row.
	a := &dlpack.Array[int32]{Data: data, Shape: []int64{3, 2}, Strides: []int64{-4, 2}, Offset: 8, ReadOnly: true}
	f, err := dlpack.From(a)
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, f.Writable())
	_, err = dlpack.Span[int32](f)
	assert.ErrorIs(t, err, dlpack.ErrReadOnly)
	v, err := dlpack.ViewOf[int32](f)
	require.NoError(t, err)
	var got []int32
	for _, x := range v.All() {
		got = append(got, x)
	}
	assert.Equal(t, []int32{8, 10, 4, 6, 0, 2}, got)
}

func TestFromWritableOfReadOnlyCopies(t *testing.T) {
	xs := []float64{1, 2, 3}
	a := &dlpack.Array[float64]{Data: xs, Shape: []int64{3}, ReadOnly: true}
	f, err := dlpack.From(a, dlpack.RequireWritable())
	require.NoError(t, err)
	assert.True(t, f.IsCopied())
	got, err := dlpack.Slice[float64](f)
	require.NoError(t, err)
	got[0] = 99
	assert.Equal(t, 1.0, xs[0], "the copy is the consumer's own")
	assert.Equal(t, []float64{99, 2, 3}, got)
	require.NoError(t, f.Close())

	_, err = dlpack.FromRequest(a, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyNever, Writable: true})
	assert.ErrorIs(t, err, dlpack.ErrReadOnly)
	assert.ErrorContains(t, err, "request.copy")
}

func TestProduceArrayVersionedShares(t *testing.T) {
	xs := dlpack.AlignedSlice[float32](6)
	for i := range xs {
		xs[i] = float32(i)
	}
	m, err := dlpack.NewArray(xs, []int64{2, 3}).DLPack(dlpack.Request{})
	require.NoError(t, err)
	require.NotNil(t, m.Versioned)
	assert.Nil(t, m.Legacy)
	assert.Equal(t, uintptr(unsafe.Pointer(&xs[0])), m.Versioned.DLTensor.Data)
	assert.Zero(t, m.Versioned.DLTensor.ByteOffset)
	assert.Equal(t, int64(1), dlpack.Outstanding())
	assert.Equal(t, 15.0, cshim.SumVersioned(unsafe.Pointer(m.Versioned)))
	m.Close()
	assert.Zero(t, dlpack.Outstanding())
}

func TestProduceReleasesOwnerOnce(t *testing.T) {
	s := newCounting(6, 2, 3)
	m, err := dlpack.Produce(s, dlpack.Request{})
	require.NoError(t, err)
	runtime.GC()
	assert.Zero(t, s.own.released.Load(), "the owner is held until the deleter")
	cshim.ReleaseOnThreads([]unsafe.Pointer{m.Pointer()}, 1, false)
	assert.Equal(t, int64(1), s.own.released.Load())
	assert.Zero(t, dlpack.Outstanding())
}

func TestProduceLegacyReadOnly(t *testing.T) {
	s := newCounting(4, 4)
	s.readOnly = true
	// A legacy consumer (JAX asks with stream=None only) gets a copy.
	m, err := dlpack.Produce(s, dlpack.Request{Legacy: true})
	require.NoError(t, err)
	require.NotNil(t, m.Legacy)
	assert.True(t, m.IsLegacy())
	assert.NotEqual(t, uintptr(unsafe.Pointer(&s.data[0])), m.Legacy.DLTensor.Data)
	assert.Zero(t, m.Legacy.DLTensor.Data%256, "copies are 256-byte aligned")
	assert.Equal(t, 6.0, cshim.SumLegacy(unsafe.Pointer(m.Legacy)))
	assert.Equal(t, int64(1), s.own.released.Load(), "a copy owes nothing to its source")
	m.Close()

	// Unless copies are forbidden.
	_, err = dlpack.Produce(s, dlpack.Request{Legacy: true, Copy: dlpack.CopyNever})
	assert.ErrorIs(t, err, dlpack.ErrReadOnly)
	var fe *dlpack.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "request.max_version", fe.Field)
	assert.Equal(t, int64(2), s.own.released.Load(), "a refused description is released too")

	// A versioned consumer shares it, flagged.
	m, err = dlpack.Produce(s, dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, dlpack.FlagReadOnly, m.Versioned.Flags)
	assert.Equal(t, uintptr(unsafe.Pointer(&s.data[0])), m.Versioned.DLTensor.Data)
	m.Close()
	assert.Equal(t, int64(3), s.own.released.Load())
	assert.Zero(t, dlpack.Outstanding())
}

func TestProduceCopyAlwaysStrided(t *testing.T) {
	s := newCounting(12, 3, 2)
	s.strides = []int64{-4, 2}
	s.offset = 8 * 8
	m, err := dlpack.Produce(s, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways})
	require.NoError(t, err)
	assert.Equal(t, dlpack.FlagIsCopied, m.Versioned.Flags)
	f, err := m.Import()
	require.NoError(t, err)
	defer f.Close()
	assert.True(t, f.IsContiguous())
	got, err := dlpack.Slice[float64](f)
	require.NoError(t, err)
	assert.Equal(t, []float64{8, 10, 4, 6, 0, 2}, got)
}

func TestProduceRequestErrors(t *testing.T) {
	s := newCounting(4, 4)
	cases := []struct {
		name     string
		req      dlpack.Request
		sentinel error
		field    string
	}{
		{"device", dlpack.Request{MaxVersion: dlpack.CurrentVersion, Device: dlpack.Device{Type: dlpack.CUDA}}, dlpack.ErrDevice, "request.device"},
		{"stream", dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: 1, HasStream: true}, dlpack.ErrRequest, "request.stream"},
		{"copy mode", dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: 7}, dlpack.ErrRequest, "request.copy"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := dlpack.Produce(s, c.req)
			assert.ErrorIs(t, err, c.sentinel)
			var fe *dlpack.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, c.field, fe.Field)
			assert.Equal(t, int64(i+1), s.own.released.Load())
		})
	}
	// stream=-1 (no synchronisation) is fine on the CPU.
	m, err := dlpack.Produce(s, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: -1, HasStream: true})
	require.NoError(t, err)
	m.Close()
	// The CPU device, asked for explicitly, is fine too.
	m, err = dlpack.Produce(s, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Device: dlpack.CPUDevice})
	require.NoError(t, err)
	m.Close()
}

func TestDescriptionErrors(t *testing.T) {
	cases := []struct {
		name     string
		mut      func(s *countingSource)
		sentinel error
		field    string
	}{
		{"too big", func(s *countingSource) { s.shape = []int64{5} }, dlpack.ErrShape, "description.shape"},
		{"offset past end", func(s *countingSource) { s.offset = 8 }, dlpack.ErrShape, "description.shape"},
		{"negative stride below data", func(s *countingSource) { s.strides = []int64{-1} }, dlpack.ErrShape, "description.shape"},
		{"negative dim", func(s *countingSource) { s.shape = []int64{-1} }, dlpack.ErrShape, "description.shape[0]"},
		{"strides count", func(s *countingSource) { s.strides = []int64{1, 1} }, dlpack.ErrStrides, "description.strides"},
		{"nil data", func(s *countingSource) { s.data = nil; s.size = 32 }, dlpack.ErrNullData, "description.data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newCounting(4, 4)
			c.mut(s)
			for _, produce := range []func() error{
				func() error { _, err := dlpack.Produce(s, dlpack.Request{}); return err },
				func() error { _, err := dlpack.From(s); return err },
			} {
				err := produce()
				assert.ErrorIs(t, err, c.sentinel)
				var fe *dlpack.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, c.field, fe.Field)
			}
			assert.Equal(t, int64(2), s.own.released.Load(), "refused descriptions are released")
		})
	}
	assert.Zero(t, dlpack.Outstanding())
}

// TestReexportChain: a C producer's tensor imported by Go and handed on to
// two consumers; its deleter runs exactly once, after the last of the Go
// owner and the consumers, in every order.
func TestReexportChain(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		ct := cshim.Make(cpuF32([]int64{2, 3}, f32s(1, 2, 3, 4, 5, 6)))
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		m1, err := f.DLPack(dlpack.Request{})
		require.NoError(t, err)
		assert.Equal(t, f.DataAddr(), m1.Versioned.DLTensor.Data, "handed on without a copy")
		m2, err := dlpack.Produce(f, dlpack.Request{Legacy: true}) // legacy, writable data: shared too
		require.NoError(t, err)
		assert.Equal(t, f.DataAddr(), m2.Legacy.DLTensor.Data)
		assert.Equal(t, 21.0, cshim.SumVersioned(m1.Pointer()))
		assert.Equal(t, 21.0, cshim.SumLegacy(m2.Pointer()))
		release := []func(){
			func() { f.Close() },
			func() { cshim.ReleaseOnThreads([]unsafe.Pointer{m1.Pointer()}, 1, false) },
			func() { cshim.ReleaseOnThreads([]unsafe.Pointer{m2.Pointer()}, 1, true) },
		}
		for i, k := range order {
			assert.Zero(t, ct.Deletes(), "order %v step %d", order, i)
			release[k]()
		}
		assert.Equal(t, int64(1), ct.Deletes(), "order %v", order)
	}
	assert.Zero(t, dlpack.Outstanding())
}

// TestReexportGoToGo: an imported tensor taken Go to Go by From holds it
// like a consumer does.
func TestReexportGoToGo(t *testing.T) {
	ct := cshim.Make(cpuF32([]int64{3}, f32s(1, 2, 3)))
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	g, err := dlpack.From(f)
	require.NoError(t, err)
	assert.Equal(t, f.DataAddr(), g.DataAddr())
	require.NoError(t, f.Close())
	assert.Zero(t, ct.Deletes())
	xs, err := dlpack.Slice[float32](g)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, xs)
	require.NoError(t, g.Close())
	assert.Equal(t, int64(1), ct.Deletes())

	// A closed Foreign cannot be handed on.
	_, err = f.DLPack(dlpack.Request{})
	assert.ErrorIs(t, err, dlpack.ErrClosed)
}

func TestReexportBorrowedRefused(t *testing.T) {
	ct := cshim.Make(cpuF32([]int64{3}, f32s(1, 2, 3)))
	err := dlpack.Borrow(ct.Ptr, func(f dlpack.Foreign) error {
		_, err := f.DLPack(dlpack.Request{})
		return err
	})
	assert.ErrorIs(t, err, dlpack.ErrBorrowed)
	assert.Equal(t, int64(1), ct.Deletes())
}

func TestReexportReadOnlyLegacyCopies(t *testing.T) {
	spec := cpuF32([]int64{3}, f32s(1, 2, 3))
	spec.Flags = uint64(dlpack.FlagReadOnly)
	ct := cshim.Make(spec)
	f, err := dlpack.Import(ct.Ptr)
	require.NoError(t, err)
	m, err := f.DLPack(dlpack.Request{Legacy: true}) // a legacy consumer, as JAX is
	require.NoError(t, err)
	assert.NotEqual(t, f.DataAddr(), m.Legacy.DLTensor.Data)
	assert.Equal(t, 6.0, cshim.SumLegacy(m.Pointer()))
	require.NoError(t, f.Close())
	assert.Equal(t, int64(1), ct.Deletes(), "the copy holds nothing of the original")
	m.Close()
}

// TestReexportConcurrent: the Go owner and many consumers let go at once,
// from goroutines and C threads; the producer's deleter runs once.
func TestReexportConcurrent(t *testing.T) {
	for round := 0; round < 50; round++ {
		ct := cshim.Make(cpuF32([]int64{4}, f32s(1, 2, 3, 4)))
		f, err := dlpack.Import(ct.Ptr)
		require.NoError(t, err)
		var ms []unsafe.Pointer
		var gs []dlpack.Foreign
		for i := 0; i < 8; i++ {
			m, err := f.DLPack(dlpack.Request{})
			require.NoError(t, err)
			ms = append(ms, m.Pointer())
			g, err := dlpack.From(f)
			require.NoError(t, err)
			gs = append(gs, g)
		}
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); cshim.ReleaseOnThreads(ms, 4, false) }()
		go func() {
			defer wg.Done()
			for _, g := range gs {
				g.Close()
			}
		}()
		go func() { defer wg.Done(); f.Close(); f.Close() }()
		wg.Wait()
		require.Equal(t, int64(1), ct.Deletes(), "round %d", round)
	}
	assert.Zero(t, dlpack.Outstanding())
}

func TestFromLeakedSourceReleasedByCleanup(t *testing.T) {
	s := newCounting(4, 4)
	before := dlpack.ReadStats().LeakedImports
	func() {
		_, err := dlpack.From(s)
		require.NoError(t, err)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.own.released.Load() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int64(1), s.own.released.Load())
	assert.Equal(t, before+1, dlpack.ReadStats().LeakedImports)
}

// plainProducer implements only Producer: From goes through DLPack and
// Import.
type plainProducer struct{ xs []int64 }

func (p plainProducer) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }
func (p plainProducer) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	if req.IsLegacy() {
		m, err := dlpack.ExportLegacy(p.xs, []int64{int64(len(p.xs))})
		return dlpack.Managed{Legacy: m}, err
	}
	m, err := dlpack.Export(p.xs, []int64{int64(len(p.xs))})
	return dlpack.Managed{Versioned: m}, err
}

func TestFromPlainProducer(t *testing.T) {
	p := plainProducer{xs: []int64{4, 5, 6}}
	f, err := dlpack.From(p)
	require.NoError(t, err)
	assert.Equal(t, int64(1), dlpack.Outstanding())
	xs, err := dlpack.Slice[int64](f)
	require.NoError(t, err)
	assert.Equal(t, p.xs, xs)
	require.NoError(t, f.Close())
	assert.Zero(t, dlpack.Outstanding())

	f, err = dlpack.FromRequest(p, dlpack.Request{Legacy: true})
	require.NoError(t, err)
	assert.True(t, f.Legacy())
	require.NoError(t, f.Close())
}

func TestBufferAsSource(t *testing.T) {
	b, err := dlpack.NewBuffer[int16]([]int64{2, 2})
	require.NoError(t, err)
	copy(b.Data(), []int16{1, 2, 3, 4})
	f, err := dlpack.From(b)
	require.NoError(t, err)
	m, err := b.DLPack(dlpack.Request{})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	xs, err := dlpack.Slice[int16](f)
	require.NoError(t, err)
	assert.Equal(t, []int16{1, 2, 3, 4}, xs, "the memory outlives Close while held")
	require.NoError(t, f.Close())
	assert.Positive(t, dlpack.ReadStats().CBlocks, "the consumer still holds the buffer")
	m.Close()
	assert.Zero(t, dlpack.ReadStats().CBlocks, "freed with the last holder")
	_, err = dlpack.From(b)
	assert.ErrorIs(t, err, dlpack.ErrClosed)
}

func TestAlignedSlice(t *testing.T) {
	for n := 0; n < 40; n++ {
		a := dlpack.AlignedSlice[float64](n)
		b := dlpack.AlignedSlice[uint8](n)
		c := dlpack.AlignedSlice[complex128](n)
		require.Len(t, a, n)
		require.Len(t, b, n)
		require.Len(t, c, n)
		if n > 0 {
			assert.Zero(t, uintptr(unsafe.Pointer(&a[0]))%256)
			assert.Zero(t, uintptr(unsafe.Pointer(&b[0]))%256)
			assert.Zero(t, uintptr(unsafe.Pointer(&c[0]))%256)
		}
	}
}

func TestEmptyArrayProduce(t *testing.T) {
	a := dlpack.NewArray([]float32{}, []int64{0, 3})
	m, err := a.DLPack(dlpack.Request{})
	require.NoError(t, err)
	assert.NotZero(t, m.Versioned.DLTensor.Data, "never NULL")
	f, err := m.Import()
	require.NoError(t, err)
	assert.Equal(t, int64(0), f.Len())
	require.NoError(t, f.Close())
	g, err := dlpack.From(a)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 3}, g.Shape())
	require.NoError(t, g.Close())
}

func TestManagedZero(t *testing.T) {
	var m dlpack.Managed
	assert.Nil(t, m.Pointer())
	m.Close()
	_, err := m.Import()
	assert.True(t, errors.Is(err, dlpack.ErrNilPointer))
}

// An empty CPU tensor described with nil Data is copied like any other
// when the request needs a copy (a read-only one for a legacy consumer).
func TestEmptyNilDataCopies(t *testing.T) {
	a := &dlpack.Array[float64]{Shape: []int64{0}, ReadOnly: true}
	m, err := a.DLPack(dlpack.Request{Legacy: true})
	require.NoError(t, err)
	require.NotNil(t, m.Legacy)
	f, err := m.Import()
	require.NoError(t, err)
	assert.Equal(t, int64(0), f.Len())
	require.NoError(t, f.Close())
	g, err := dlpack.FromRequest(a, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways})
	require.NoError(t, err)
	assert.True(t, g.IsCopied())
	require.NoError(t, g.Close())
}

// A Buffer's own export (pure-C deleter) answers the requests it can share
// as it is. (From takes a Buffer with no allocation but its safety net's:
// TestHotPathAllocations.)
func TestBufferDLPackPureC(t *testing.T) {
	b, err := dlpack.NewBuffer[float32]([]int64{4})
	require.NoError(t, err)
	defer b.Close()
	before := dlpack.ReadStats()
	m, err := b.DLPack(dlpack.Request{})
	require.NoError(t, err)
	assert.Equal(t, before.BufferExports+1, dlpack.ReadStats().BufferExports, "the buffer's own export")
	assert.Equal(t, before.GoExports, dlpack.ReadStats().GoExports)
	assert.Equal(t, uintptr(unsafe.Pointer(&b.Data()[0])), m.Versioned.DLTensor.Data)
	cshim.ReleaseOnThreads([]unsafe.Pointer{m.Pointer()}, 1, false)
	m, err = b.DLPack(dlpack.Request{Legacy: true})
	require.NoError(t, err)
	require.NotNil(t, m.Legacy)
	m.Close()
	m, err = b.DLPack(dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways})
	require.NoError(t, err)
	assert.True(t, m.Versioned.Flags&dlpack.FlagIsCopied != 0)
	m.Close()
	_, err = b.DLPack(dlpack.Request{MaxVersion: dlpack.CurrentVersion, Stream: 3, HasStream: true})
	assert.ErrorIs(t, err, dlpack.ErrRequest)
	// From's allocations: TestHotPathAllocations.
}

// misalignedSource describes float64s that start 4 bytes past an 8-byte
// boundary (as the data of a .npy file whose header is not padded does),
// or, with device set, the same address on a GPU.
type misalignedSource struct {
	raw    []byte
	device dlpack.Device
	own    *countingOwner
}

func (s *misalignedSource) DescribeTensor(d *dlpack.Description) error {
	*d = dlpack.Description{Data: unsafe.Pointer(&s.raw[4]), Size: 24, DType: dlpack.Float64, Shape: []int64{3}, ReadOnly: true, Owner: s.own}
	if s.device != (dlpack.Device{}) {
		d.Data, d.Addr, d.Device = nil, uintptr(unsafe.Pointer(&s.raw[4])), s.device
	}
	return nil
}

// Produce never hands a consumer a pointer misaligned for its type: it
// copies into aligned memory (FlagIsCopied) when the request allows a
// copy, and fails with ErrAlignment naming the address otherwise.
func TestProduceMisalignedCopies(t *testing.T) {
	raw := dlpack.AlignedSlice[byte](32)
	for i, v := range []float64{1.5, -2, 3.25} {
		binary.LittleEndian.PutUint64(raw[4+8*i:], math.Float64bits(v))
	}
	s := &misalignedSource{raw: raw, own: new(countingOwner)}
	for _, req := range []dlpack.Request{{}, {MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyAlways}, {Legacy: true}} {
		m, err := dlpack.Produce(s, req)
		require.NoError(t, err, "request %+v", req)
		var tn *dlpack.Tensor
		if m.IsLegacy() {
			tn = &m.Legacy.DLTensor
		} else {
			tn = &m.Versioned.DLTensor
			assert.Equal(t, dlpack.FlagIsCopied, m.Versioned.Flags, "a copy is the consumer's: flagged copied, not read-only")
		}
		assert.Zero(t, tn.Data%8, "data %#x misaligned for float64", tn.Data)
		assert.NotEqual(t, uintptr(unsafe.Pointer(&raw[4])), tn.Data)
		if m.IsLegacy() {
			assert.Equal(t, 2.75, cshim.SumLegacy(unsafe.Pointer(m.Legacy)))
		} else {
			assert.Equal(t, 2.75, cshim.SumVersioned(unsafe.Pointer(m.Versioned)))
		}
		require.NoError(t, m.Close())
	}
	assert.Equal(t, int64(3), s.own.released.Load())

	_, err := dlpack.Produce(s, dlpack.Request{MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyNever})
	require.ErrorIs(t, err, dlpack.ErrAlignment)
	var fe *dlpack.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "description.data", fe.Field)
	assert.Contains(t, err.Error(), "the alignment of float64")
	assert.Contains(t, err.Error(), fmt.Sprintf("%#x", uintptr(unsafe.Pointer(&raw[4]))))

	// Device memory cannot be copied here: refused, whatever the request.
	g := &misalignedSource{raw: raw, device: dlpack.Device{Type: dlpack.CUDA}, own: new(countingOwner)}
	_, err = dlpack.Produce(g, dlpack.Request{})
	require.ErrorIs(t, err, dlpack.ErrAlignment)
	assert.Contains(t, err.Error(), "cuda")
	assert.Equal(t, int64(1), g.own.released.Load())
	assert.Zero(t, dlpack.Outstanding())
}

func TestDataTypeAlignment(t *testing.T) {
	for dt, want := range map[dlpack.DataType]int{
		dlpack.Bool: 1, dlpack.Int8: 1, dlpack.Float16: 2, dlpack.BFloat16: 2, dlpack.Float32: 4,
		dlpack.Float64: 8, dlpack.Int64: 8, dlpack.Complex64: 4, dlpack.Complex128: 8,
		dlpack.Float8E4M3FN: 1, {Code: dlpack.CodeFloat4E2M1FN, Bits: 4, Lanes: 1}: 1,
		{Code: dlpack.CodeFloat, Bits: 32, Lanes: 4}: 4, {Code: dlpack.CodeOpaqueHandle, Bits: 24, Lanes: 1}: 1,
		{Code: dlpack.CodeOpaqueHandle, Bits: 128, Lanes: 1}: 8,
	} {
		assert.Equal(t, want, dt.Alignment(), "%v", dt)
	}
}

// The zero Request is the modern default: a versioned tensor of this
// package's version, shared; legacy is asked for explicitly, by Legacy or
// a stated MaxVersion below 1.0.
func TestZeroRequestIsVersioned(t *testing.T) {
	xs := dlpack.AlignedSlice[float32](6)
	a := dlpack.NewArray(xs, []int64{2, 3})
	m, err := dlpack.Produce(a, dlpack.Request{})
	require.NoError(t, err)
	require.NotNil(t, m.Versioned, "the zero Request gets a versioned tensor")
	assert.Equal(t, dlpack.CurrentVersion, m.Versioned.Version)
	assert.Equal(t, uintptr(unsafe.Pointer(&xs[0])), m.Versioned.DLTensor.Data, "shared, not copied")
	assert.False(t, dlpack.Request{}.IsLegacy())
	require.NoError(t, m.Close())
	for _, req := range []dlpack.Request{{Legacy: true}, {MaxVersion: dlpack.Version{Minor: 8}}} {
		assert.True(t, req.IsLegacy(), "%+v", req)
		m, err := dlpack.Produce(a, req)
		require.NoError(t, err)
		require.NotNil(t, m.Legacy, "%+v asks for a legacy tensor", req)
		require.NoError(t, m.Close())
	}
	requireNoOutstanding(t)
}
