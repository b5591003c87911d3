package dlpack

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Foreign is an imported tensor: a handle to a managed tensor that this
// package owns on the caller's behalf. It is a small value; copies refer to
// the same tensor, and Close through any of them releases it.
//
// Every field was validated before ownership was taken, and the accessors
// return copies made at that time. Accessors of a closed Foreign return zero
// values (Err tells why); views return ErrClosed. The zero Foreign is closed.
//
// Views of the data ([Slice], [ViewOf]) point into the producer's memory.
// A [View] keeps the Foreign alive; a plain slice does not, so keep the
// Foreign reachable (defer Close) while a slice is in use:
//
//	t, err := dlpack.Import(p)
//	if err != nil { return err } // p was already released
//	defer t.Close()
//	xs, err := dlpack.Slice[float32](t)
type Foreign struct {
	s   *foreignState
	own *owner // owned imports: the owner, a slab's or its own, whose cleanup is the safety net (owner.go)
	gen uint32
}

// live returns the state if the handle is open, else nil.
func (f Foreign) live() *foreignState {
	s := f.s
	if s == nil || s.st.Load() != uint64(f.gen)<<2|stOpen {
		return nil
	}
	return s
}

// Close releases the tensor: the producer's deleter is called exactly once,
// whichever copy of the handle, goroutine or cleanup gets there first.
// Close is idempotent and always returns nil; slices and views of the data
// must not be used afterwards.
func (f Foreign) Close() error {
	switch s := f.s; {
	case s == nil:
	case f.own != nil:
		s.closeOwned(f.gen)
		runtime.KeepAlive(f.own) // no cleanup while Close runs
	default:
		s.closeScoped(f.gen)
	}
	return nil
}

// closedInfo is what the accessors of a closed Foreign read: zero values.
var closedInfo checked

// info returns the validated description while the tensor is open, and
// closedInfo (never written) afterwards.
func (f Foreign) info() *checked {
	if s := f.live(); s != nil {
		return &s.c
	}
	return &closedInfo
}

// Err returns nil while the tensor is open and ErrClosed afterwards.
func (f Foreign) Err() error {
	if f.live() == nil {
		return ErrClosed
	}
	return nil
}

// Closed reports whether the tensor has been released.
func (f Foreign) Closed() bool { return f.live() == nil }

// NDim returns the number of dimensions.
func (f Foreign) NDim() int { return f.info().ndim }

// Shape returns a copy of the shape (nil once closed).
func (f Foreign) Shape() []int64 { return cloneOpen(f.info().shape, f) }

// Strides returns a copy of the strides, in elements (nil once closed).
// They are always filled, also for tensors sent with NULL strides (compact
// row-major).
func (f Foreign) Strides() []int64 { return cloneOpen(f.info().strides, f) }

func cloneOpen(v []int64, f Foreign) []int64 {
	if f.Closed() {
		return nil
	}
	return clone(v)
}

// Dim returns the size of dimension i; it panics if i is out of range of
// an open tensor's dimensions.
func (f Foreign) Dim(i int) int64 {
	if c := f.info(); c != &closedInfo {
		return c.shape[i]
	}
	return 0
}

// Stride returns the stride of dimension i in elements; it panics if i is
// out of range of an open tensor's dimensions.
func (f Foreign) Stride(i int) int64 {
	if c := f.info(); c != &closedInfo {
		return c.strides[i]
	}
	return 0
}

// Len returns the number of elements.
func (f Foreign) Len() int64 { return f.info().numel }

// DataType returns the element type.
func (f Foreign) DataType() DataType { return f.info().dtype }

// Device returns where the data lives.
func (f Foreign) Device() Device { return f.info().device }

// Flags returns the producer's flags (0 for legacy tensors).
func (f Foreign) Flags() Flags { return f.info().flags }

// Version returns the producer's DLPack version (0.0 for legacy tensors).
func (f Foreign) Version() Version { return f.info().version }

// Legacy reports whether the tensor came as a pre-1.0 DLManagedTensor.
func (f Foreign) Legacy() bool { return f.info().legacy }

// ByteOffset returns the producer's byte_offset (already applied by every
// view and by DataAddr).
func (f Foreign) ByteOffset() uint64 { return f.info().offset }

// DataAddr returns the address of the first element (data + byte_offset),
// which for device tensors is a device address; 0 if data is NULL.
func (f Foreign) DataAddr() uintptr { return f.info().data }

// NBytes returns the bytes a compact buffer of this tensor would take
// (packed for sub-byte types unless FlagSubbyteTypePadded).
func (f Foreign) NBytes() int64 {
	c := f.info()
	n, _ := c.dtype.StorageBytes(c.numel, c.flags&FlagSubbyteTypePadded != 0)
	return n
}

// IsContiguous reports whether the tensor is compact row-major (strides of
// size-1 dimensions do not matter).
func (f Foreign) IsContiguous() bool { return f.info().contiguous }

// Writable reports whether views may write: not read-only, and for legacy
// tensors only with AssumeWritable.
func (f Foreign) Writable() bool { return f.info().writable }

// IsCopied reports FlagIsCopied: the producer made this copy for us alone.
func (f Foreign) IsCopied() bool { return f.Flags()&FlagIsCopied != 0 }

// String describes the tensor, such as "float32[2 3] cpu strides [3 1]".
func (f Foreign) String() string {
	s := f.live()
	if s == nil {
		return "dlpack.Foreign(closed)"
	}
	str := fmt.Sprintf("%v%v %v strides %v", s.c.dtype, s.c.shape, s.c.device, s.c.strides)
	if !s.c.writable {
		str += " read-only"
	}
	return str
}

// DescribeTensor implements Source, which makes a Foreign re-exportable:
// an imported tensor handed on to other consumers (C, Python, Rust, Go)
// without a copy. The Foreign and each consumer hold the tensor; the
// original producer's deleter runs exactly once, after Close and the last
// consumer's release, in whatever order they come. Only owned imports
// (Import, From) can be handed on: a borrowed one (Borrow, BorrowBatch)
// ends with its scope, and is refused with ErrBorrowed.
func (f Foreign) DescribeTensor(d *Description) error {
	s := f.live()
	if s == nil {
		return ErrClosed
	}
	if !s.owned {
		return fieldErr(ErrBorrowed, "Foreign", "borrowed", "a scoped import ends with its scope; use Import to hand a tensor on")
	}
	if !s.hold(f.gen) {
		return ErrClosed
	}
	c := &s.c
	d.DType, d.Device, d.Shape, d.Strides = c.dtype, c.device, c.shape, c.strides
	d.ReadOnly = !c.writable
	d.Owner = s
	if c.numel == 0 {
		return nil
	}
	lo, hi, _ := c.byteSpan(c.dtype, c.flags&FlagSubbyteTypePadded != 0)
	d.Size, d.ByteOffset = uintptr(hi-lo), uint64(-lo)
	switch {
	case s.goBase != nil:
		d.Data = unsafe.Add(s.goBase, int(s.goOff)+int(lo))
	case c.device.Type == CPU || s.hostOK:
		d.Data = unsafe.Add(*(*unsafe.Pointer)(unsafe.Pointer(&c.data)), lo)
	default:
		d.Addr = c.data + uintptr(lo)
	}
	return nil
}

// DLPackDevice implements Producer: the tensor's device.
func (f Foreign) DLPackDevice() Device { return f.Device() }

// DLPack implements Producer through Produce: the tensor handed on.
func (f Foreign) DLPack(req Request) (Managed, error) { return Produce(f, req) }

// foreignState is the state behind Foreign handles, pooled and reused by
// imports of both kinds: closing or ending a scope moves its generation on,
// so stale handles read as closed.
type foreignState struct {
	// st is gen<<2 | stOpen | stReleasing. A handle is open while st reads
	// its gen with stOpen; whoever moves st off that value by CAS owns the
	// release. gen moves on when an owned import is closed (or leaked) and
	// when a scope ends; a scope waits for an early Close in flight
	// (stReleasing) first. The state goes back to the pool only after the
	// release, so the plain fields below are stable for whoever won the
	// claim.
	st      atomic.Uint64
	self    uintptr // the managed struct
	deleter uintptr
	cleanup runtime.Cleanup // owned imports with an owner of their own: its cleanup
	ledger  *slabLedger     // owned imports with a slab's owner: the slab's ledger, until Close
	slot    uint8           // ... and their entry in it
	hostOK  bool            // CPU views allowed (CPU, or host memory with AllowHostMemory)

	c       checked
	goBase  unsafe.Pointer // Go-memory export of this package: the pinned object
	goOff   uintptr        // data - goBase
	goBlock unsafe.Pointer // Go-memory export of this package: its C block (prefix), released in Go
	goRec   *exportRecord  // ... and its record
	dims    [16]int64      // shape and strides storage for ndim <= 8
	extra   []int64        // shape and strides storage for larger ndim

	// Owned imports (Import, From) can be handed on: holds counts the Go
	// handle (until Close or the cleanup) plus every consumer of a
	// re-export; the last to go releases the tensor. Scoped imports keep
	// owned false.
	holds atomic.Int32
	owned bool
	spare uint8 // the spareStates slot, plus one, that recycle returns the state to
	// Go-to-Go imports (From a Source): no managed struct, no deleter;
	// owner is the Source's Owner, released at the end.
	native   bool
	releases bool // owner implements Releaser
	owner    any
	desc     Description // scratch for the Source's DescribeTensor
}

// statePool holds the states of imports (behind spareStates). A pooled state's word already
// reads its next generation as open, so an import's only atomic
// read-modify-write is the CAS that ends it.
var statePool = sync.Pool{New: func() any { return newState() }}

func newState() *foreignState {
	s := new(foreignState)
	s.st.Store(stOpen)
	return s
}

const (
	stOpen      = 1 // the tensor is held and not yet claimed for release
	stReleasing = 2 // a Close is calling the deleter
)

// endScope releases a scoped tensor not closed by fn, invalidates every
// handle to it and returns the state to the pool.
func (s *foreignState) endScope() {
	if s.endClaim() {
		s.releaseClaimed()
	}
	s.recycle()
}

// endClaim ends a scope: it moves the state to its next generation (32
// bits, as in Foreign), so that every handle to the scope reads as closed,
// and reports whether the caller must release the tensor, which it must
// unless fn closed it. A Close in flight on another goroutine is waited
// for, so that the state can be reused.
func (s *foreignState) endClaim() bool {
	w := uint64(s.gen()) << 2
	if s.st.CompareAndSwap(w|stOpen, nextGen(w)) {
		return true
	}
	for s.st.Load() != w {
		runtime.Gosched()
	}
	s.st.Store(nextGen(w))
	return false
}

// gen returns the generation the state's word is at.
func (s *foreignState) gen() uint32 { return uint32(s.st.Load() >> 2) }

// nextGen returns the state word of the generation after w's, open.
func nextGen(w uint64) uint64 { return uint64(uint32(w>>2)+1)<<2 | stOpen }

// recycle returns a state, its word open for a generation no
// handle has, to the pool. The next load overwrites every field; only
// references out of the state are dropped.
func (s *foreignState) recycle() {
	s.dropRefs()
	if i := s.spare; i != 0 {
		s.spare = 0
		if spareStates[i-1].p.CompareAndSwap(nil, s) {
			return
		}
	}
	statePool.Put(s)
}

// spareStates keeps idle states in front of statePool: an import takes
// the state in the slot its goroutine picks (takeState), and recycle puts
// it back there, where that goroutine's next import finds it. A load and a
// CAS each way cost less than the pool's Get and Put (which pin the P
// twice each); an empty or taken slot falls back to the pool. The slot is
// picked by stackSlot. The slots hold no references but the states
// (dropRefs runs first): at most len(spareStates) idle states.
var spareStates [1 << spareBits]struct {
	p atomic.Pointer[foreignState]
	_ [56]byte // one slot per cache line
}

const spareBits = 6

// takeState returns an idle state, from the calling goroutine's spare slot
// or from the pool, marked to go back to that slot.
func takeState() *foreignState {
	var sp byte
	i := uint8(stackSlot(unsafe.Pointer(&sp), spareBits)) + 1
	slot := &spareStates[i-1].p
	s := slot.Load()
	if s == nil || !slot.CompareAndSwap(s, nil) {
		s = statePool.Get().(*foreignState)
	}
	s.spare = i
	return s
}

// dropRefs drops the state's references out of itself (to an export of
// ours that came back), so that an idle state keeps nothing alive.
func (s *foreignState) dropRefs() {
	if s.goBase != nil || s.goBlock != nil || s.owner != nil {
		s.goBase, s.goBlock, s.goRec, s.owner = nil, nil, nil, nil
	}
	if s.ledger != nil {
		s.ledger = nil
	}
	s.owned, s.native, s.releases, s.cleanup = false, false, false, runtime.Cleanup{}
}

// claim claims the release of an owned import of generation gen, and
// moves the state to its next generation: every handle to it reads as
// closed from now on. It reports whether the caller won.
func (s *foreignState) claim(gen uint32) bool {
	w := uint64(gen) << 2
	return s.st.CompareAndSwap(w|stOpen, nextGen(w))
}

// closeOwned drops the Go handle's hold on an owned import if it is still
// open: the tensor is released (the deleter called once, whoever calls
// first) and the state returned to the pool now, or by the last consumer
// of a re-export.
func (s *foreignState) closeOwned(gen uint32) {
	if s.claim(gen) {
		if s.ledger != nil {
			s.leaveLedger()
		} else {
			s.cleanup.Stop() // a no-op for the zero Cleanup of a Go-to-Go import without a safety net
		}
		s.drop()
	}
}

// closeScoped releases a scoped import early if the handle of generation
// gen is still open; the scope's end returns the state to the pool.
func (s *foreignState) closeScoped(gen uint32) {
	w := uint64(gen) << 2
	if !s.st.CompareAndSwap(w|stOpen, w|stReleasing) {
		return
	}
	s.releaseClaimed()
	s.st.Store(w) // closed; a waiting endScope may go on
}

// releaseClaimed releases the tensor: the producer's deleter, or the
// Source's owner of a Go-to-Go import. The caller has claimed the release.
func (s *foreignState) releaseClaimed() {
	switch {
	case s.native:
		o := s.owner
		s.owner = nil
		if s.releases {
			releaseOwner(o)
		}
	case s.goBlock != nil:
		releaseGoBlock(s.goBlock, s.goRec) // our own export: no trip through C and back
	case s.deleter != 0:
		callDeleter(s.deleter, s.self)
	}
	runtime.KeepAlive(s)
}

// ReleaseTensor drops a consumer's hold on an imported tensor (see
// Foreign.DescribeTensor).
func (s *foreignState) ReleaseTensor() { s.drop() }

// hold adds a consumer's hold to an owned import while its handle of
// generation gen is open.
func (s *foreignState) hold(gen uint32) bool {
	// Never from zero: a state with no holds is released or pooled, and
	// a stale handle racing with the last release must not revive it.
	for {
		h := s.holds.Load()
		if h <= 0 {
			return false
		}
		if s.holds.CompareAndSwap(h, h+1) {
			break
		}
	}
	if s.st.Load() != uint64(gen)<<2|stOpen {
		s.drop()
		return false
	}
	return true
}

// drop removes one hold (the Go handle's, at Close, or a consumer's); the
// last one releases the tensor and recycles the state.
func (s *foreignState) drop() {
	if s.holds.Add(-1) == 0 {
		s.releaseClaimed()
		s.recycle()
	}
}
