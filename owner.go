package dlpack

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ---- The safety net of owned imports ---------------------------------------
//
// Every copy of an owned import's Foreign, and every View of it, points at
// an owner; when the owner becomes unreachable with the tensor still open,
// a cleanup releases the tensor and counts it in Stats.LeakedImports. A
// cleanup for each import cost more than everything else in Import + Close
// (runtime.AddCleanup and Cleanup.Stop each take the runtime's global
// special lock and a span's), so imports of C tensors share owners:
// imports made one after another on a goroutine (on one of slabCursors,
// which goroutines share when there are many) are entered, up to
// slabOwners of them, in one slab, whose owner their Foreigns point at.
//
// A slab takes imports until it is full, or until the collection after it
// was started (retireSlabs), and is then retired. If every import of it is
// closed by then, as when imports are closed soon after they are made,
// nothing of it can leak: it needs no cleanup, and its ledger goes back to
// the pool. Otherwise it gets one cleanup for all of its imports. What a
// slab holds, and for how long:
//
//   - The slab (32 bytes) lives while any Foreign or View of any of its
//     imports is reachable, and until it is retired.
//   - Its ledger (776 bytes; the cleanup's argument) names the state and
//     generation of each of its imports that is still open. Close releases
//     the tensor at once and takes the import out of the ledger, so a
//     closed import keeps nothing alive.
//   - When a slab with a cleanup becomes unreachable, the cleanup releases
//     every import still in the ledger, those never closed, each counted
//     as leaked, and the ledger is reused.
//
// So a leaked import is released once no Foreign of its slab is reachable:
// about two collections after it and the slab's other imports were
// dropped. One import kept for the life of the process keeps at most
// slabOwners-1 leaked imports of its slab (made just before and after it,
// mostly by its goroutine) unreleased for as long: their producers' memory
// and their import states. Imports that are closed, as they should be, are
// never held back.
//
// Imports whose state refers to Go values of the caller's (a Source's
// Owner taken by From, an export of this package coming back) get an owner
// and a cleanup of their own instead: a slab's ledger must not reach the
// slab, and such a value may hold another Foreign of the same slab.

// owner is what every copy of an owned import's Foreign (and every View of
// it) refers to: a slab's, shared by its imports, or one of its own with
// its own cleanup. 16 bytes keeps an owner of its own out of the tiny
// allocator, whose objects may never be cleaned up.
type owner struct{ _ [2]uintptr }

// slabOwners is the number of imports a slab takes: the imports that share
// a cleanup, and one more than the leaked imports one long-lived import
// can hold back.
const slabOwners = 64

// ownerSlab is the object the Foreigns of up to slabOwners imports point
// into (at its owner: they need not tell themselves apart), and, if it has
// one, whose cleanup is their safety net.
type ownerSlab struct {
	own owner
	// next counts the imports entered, or being entered; sealing adds
	// slabOwners to it, so that no import enters a retired slab.
	next   atomic.Uint32
	ledger *slabLedger
}

// slabLedger is what a slab's imports need released if they leak, the
// argument of its cleanup. It must not refer to the slab, or the slab
// would never become unreachable; it refers only to import states, which
// refer to nothing of the caller's (see importOwned). states[i] is the
// state of the slab's i-th import while it is open, gens[i] its
// generation: both written by the import, states[i] cleared by its Close,
// which then counts itself in closed (leaveLedger). All of it happens
// while the slab is reachable (the import and Close hold its owner), so
// the ledger does not change once its cleanup can run.
type slabLedger struct {
	states [slabOwners]*foreignState
	gens   [slabOwners]uint32
	closed atomic.Uint32
}

// slabCursors hold the slabs that imports are entered in. An import takes
// the cursor its goroutine picks (stackSlot), so that imports on different
// cores do not contend, and one goroutine's imports, which likely end
// together, share slabs.
var slabCursors [1 << slabCursorBits]struct {
	p atomic.Pointer[ownerSlab]
	_ [56]byte // one cursor per cache line
}

const slabCursorBits = 4

// slabOwner enters the import s is the state of, with generation gen, in
// the calling goroutine's slab, and returns the slab's owner.
func slabOwner(s *foreignState, gen uint32) *owner {
	var sp byte
	cur := &slabCursors[stackSlot(unsafe.Pointer(&sp), slabCursorBits)].p
	if slab := cur.Load(); slab != nil {
		i := slab.next.Add(1) - 1
		if i < slabOwners {
			slab.enter(i, s, gen)
			return &slab.own
		}
		if i == slabOwners {
			slab.retire(slabOwners) // this import found it full: it retires it
		}
	}
	slab := &ownerSlab{ledger: ledgerPool.Get().(*slabLedger)}
	slab.next.Store(1)
	slab.enter(0, s, gen)
	if old := cur.Swap(slab); old != nil {
		old.seal() // full, or another import's new slab: whoever seals a slab retires it
	}
	startRetiring()
	return &slab.own
}

// enter writes the slab's i-th import in its ledger.
func (slab *ownerSlab) enter(i uint32, s *foreignState, gen uint32) {
	l := slab.ledger
	l.gens[i], l.states[i] = gen, s
	s.ledger, s.slot = l, uint8(i)
}

// leaveLedger takes a closed import out of its slab's ledger, which then
// no longer reaches the state (whose next import may refer to Go values of
// the caller's), and counts it as closed. The caller, Close, has claimed
// the release and holds the owner.
func (s *foreignState) leaveLedger() {
	l := s.ledger
	l.states[s.slot] = nil
	l.closed.Add(1)
}

// seal retires a slab taken out of its cursor, unless an import found it
// full (and retired it) or it was sealed before. Of the imports and seals
// that move next past slabOwners, exactly one retires the slab: the one
// that moves it from at most slabOwners to more.
func (slab *ownerSlab) seal() {
	if n := slab.next.Add(slabOwners) - slabOwners; n <= slabOwners {
		slab.retire(n)
	}
}

// retire decides what a slab that takes no more imports needs, once all n
// of its imports are entered or being entered: nothing if they are all
// closed (none can leak), else a cleanup. It runs once per slab, by
// whoever sealed it, which holds the slab.
func (slab *ownerSlab) retire(n uint32) {
	l := slab.ledger
	if l.closed.Load() == n {
		l.closed.Store(0)
		ledgerPool.Put(l) // every entry was cleared by its Close
		return
	}
	runtime.AddCleanup(slab, releaseSlab, l)
}

// ledgerPool keeps the ledgers of retired slabs that need no cleanup, and
// of those whose cleanup has run, for new slabs.
var ledgerPool = sync.Pool{New: func() any { return new(slabLedger) }}

// releaseSlab is the safety net of a slab's imports: the slab has become
// unreachable, and every import still open in its ledger was never closed.
func releaseSlab(l *slabLedger) {
	for i, s := range l.states {
		if s != nil && s.claim(l.gens[i]) {
			leakedImports.Add(1)
			s.ledger = nil // the ledger is reused
			s.drop()
		}
	}
	*l = slabLedger{}
	ledgerPool.Put(l)
}

// leakArg is what the cleanup of an owner of its own needs: the state and
// the generation it was imported as. It must not refer to the owner, or
// the owner would never become unreachable (the state does not).
type leakArg struct {
	s   *foreignState
	gen uint32
}

// ownOwner returns an owner of its own, with its own cleanup, for the
// import s is the state of, with generation gen.
func ownOwner(s *foreignState, gen uint32) *owner {
	o := new(owner)
	s.cleanup = runtime.AddCleanup(o, releaseLeaked, leakArg{s, gen})
	return o
}

// releaseLeaked is the safety net of an owner of its own: the owner of an
// import that was never closed has become unreachable.
func releaseLeaked(a leakArg) {
	if a.s.claim(a.gen) {
		leakedImports.Add(1)
		a.s.drop()
	}
}

// retiring says that a retireSlabs is armed to run after the next
// collection.
var retiring atomic.Bool

// retireTick is the object whose cleanup runs retireSlabs: it is
// unreachable as soon as it is made, so the cleanup runs after the next
// collection.
type retireTick struct{ _ [2]uintptr }

// startRetiring arms retireSlabs, unless it is armed.
func startRetiring() {
	if !retiring.Load() && retiring.CompareAndSwap(false, true) {
		runtime.AddCleanup(new(retireTick), retireSlabs, 0)
	}
}

// retireSlabs runs after each collection while imports take slabs: it
// empties the cursors and retires their slabs, so that a slab that is not
// full gets its cleanup if it needs one, and is unreachable at the next
// collection once no Foreign refers to it. It arms itself again while any
// cursor was in use since the last run, and stops when imports stop.
func retireSlabs(int) {
	used := false
	for i := range slabCursors {
		if slab := slabCursors[i].p.Swap(nil); slab != nil {
			slab.seal()
			used = true
		}
	}
	if used {
		runtime.AddCleanup(new(retireTick), retireSlabs, 0)
		return
	}
	retiring.Store(false)
	// A slab stored after the loop above, by an import that found
	// retiring still set, must not be left in its cursor for good.
	for i := range slabCursors {
		if slabCursors[i].p.Load() != nil {
			startRetiring()
			return
		}
	}
}
