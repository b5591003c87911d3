//go:build cgo

package dlpack

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/godlpack/dlpack/internal/cshim"
)

// BenchmarkSafetyNet: what the owned import's safety net costs alone, as
// Import and Close use it for a C tensor closed at once: the import
// entered in its goroutine's slab and taken out at Close; once every
// slabOwners imports, a slab, retired with every import closed, so with
// no cleanup. Import + Close less this is the owned import without its
// guarantee that an import nobody closes is released.
func BenchmarkSafetyNet(b *testing.B) {
	b.ReportAllocs()
	s := newState()
	for b.Loop() {
		o := slabOwner(s, s.gen())
		s.leaveLedger() // at Close
		runtime.KeepAlive(o)
	}
}

// BenchmarkSafetyNetOwn: the safety net of an import with an owner of its
// own (an export of this package coming back, From a Source whose Owner
// is a Releaser): a 16-byte owner, runtime.AddCleanup on it, and the
// Cleanup's Stop at Close.
func BenchmarkSafetyNetOwn(b *testing.B) {
	b.ReportAllocs()
	s := newState()
	for b.Loop() {
		o := ownOwner(s, s.gen())
		s.cleanup.Stop()
		runtime.KeepAlive(o)
	}
}

func f32Tensor() cshim.Tensor {
	return cshim.Make(cshim.Spec{Major: 1, Minor: 3, DeviceType: 1, NDim: 1, Code: 2, Bits: 32, Lanes: 1,
		Shape: []int64{1}, Strides: []int64{1}, Data: make([]byte, 4)})
}

// collectUntil runs the collector until cond holds or a few seconds pass.
func collectUntil(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// TestSlabHoldsBackItsLeaks: a leaked import is released once no Foreign
// of its slab is reachable. One import kept alive holds back at most the
// other imports of its slab, and they are released when it goes.
func TestSlabHoldsBackItsLeaks(t *testing.T) {
	const n = 4 * slabOwners
	before := leakedImports.Load()
	cts := make([]cshim.Tensor, n)
	keep := n/2 + 3
	kept := func() *owner {
		var kept *owner
		for i := range cts {
			cts[i] = f32Tensor()
			f, err := Import(cts[i].Ptr)
			require.NoError(t, err)
			if i == keep {
				kept = f.own
			}
		}
		return kept
	}()
	released := func() int {
		n := 0
		for _, ct := range cts {
			n += int(ct.Deletes())
		}
		return n
	}
	require.True(t, collectUntil(func() bool { return released() >= n-slabOwners }),
		"every slab but the kept import's is released: %d of %d", released(), n)
	for range 5 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	assert.Zero(t, cts[keep].Deletes(), "the kept import is not released")
	assert.GreaterOrEqual(t, released(), n-slabOwners, "at most the kept import's slab is held back")
	runtime.KeepAlive(kept)

	require.True(t, collectUntil(func() bool { return released() == n }), "the rest, once the kept import goes: %d of %d", released(), n)
	for i, ct := range cts {
		assert.Equal(t, int64(1), ct.Deletes(), "tensor %d", i)
	}
	assert.Equal(t, int64(n), leakedImports.Load()-before)
}

// TestCloseLeavesLedger: a closed import leaves its slab's ledger, so the
// slab refers to nothing of it but its owner.
func TestCloseLeavesLedger(t *testing.T) {
	ct := f32Tensor()
	f, err := Import(ct.Ptr)
	require.NoError(t, err)
	l, i := f.s.ledger, f.s.slot
	require.NotNil(t, l)
	assert.Same(t, f.s, l.states[i])
	require.NoError(t, f.Close())
	assert.Nil(t, l.states[i])
	assert.Equal(t, int64(1), ct.Deletes())
}

// TestRetiringStops: the slabs' retirement runs after each collection
// while imports take slabs, and stops once they do not.
func TestRetiringStops(t *testing.T) {
	f, err := Import(f32Tensor().Ptr)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	idle := func() bool {
		for i := range slabCursors {
			if slabCursors[i].p.Load() != nil {
				return false
			}
		}
		return !retiring.Load()
	}
	require.True(t, collectUntil(idle), "the cursors emptied and the retirement stopped")
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	assert.True(t, idle(), "and it stays stopped")
}

// TestOwnOwnerForGoExports: an export of this package imported back gets
// an owner of its own (its record may keep the caller's values), and its
// cleanup still releases it when nobody closes it.
func TestOwnOwnerForGoExports(t *testing.T) {
	before, out := leakedImports.Load(), Outstanding()
	xs := []float32{1, 2}
	func() {
		m, err := Export(xs, []int64{2})
		require.NoError(t, err)
		f, err := Import(unsafe.Pointer(m))
		require.NoError(t, err)
		assert.Nil(t, f.s.ledger, "not in a slab")
		assert.NotZero(t, f.s.cleanup, "a cleanup of its own")
	}()
	require.True(t, collectUntil(func() bool { return Outstanding() == out }))
	assert.Equal(t, int64(1), leakedImports.Load()-before)
}

// TestSlabRetiredOpen: a slab retired (full) while one of its imports is
// still open gets its cleanup then: the import, dropped later without
// Close, is released and counted as leaked; one closed after the
// retirement is released by its Close alone.
func TestSlabRetiredOpen(t *testing.T) {
	before := leakedImports.Load()
	leaked, closed := f32Tensor(), f32Tensor()
	var late Foreign
	func() {
		f, err := Import(leaked.Ptr)
		require.NoError(t, err)
		late, err = Import(closed.Ptr)
		require.NoError(t, err)
		for range 2 * slabOwners { // fill and retire the slab, and the next
			g, err := Import(f32Tensor().Ptr)
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}
		runtime.KeepAlive(f)
	}()
	require.NoError(t, late.Close())
	assert.Equal(t, int64(1), closed.Deletes())
	require.True(t, collectUntil(func() bool { return leaked.Deletes() == 1 }), "the import dropped after its slab was retired is released")
	assert.Equal(t, int64(1), closed.Deletes())
	assert.Equal(t, int64(1), leakedImports.Load()-before)
}
