package dlpack

import (
	"runtime"
	"strconv"
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
	own *owner // owned imports: the object whose cleanup is the safety net
	gen uint32
}

// owner is what every copy of an owned import's Foreign (and every View of
// it) refers to: when it becomes unreachable with the tensor still open,
// its cleanup releases the tensor. It is small on purpose, because it is
// the only per-import allocation besides the cleanup's own two; the state
// itself is pooled. 16 bytes keeps it out of the tiny allocator, whose
// objects may never be cleaned up.
type owner struct{ _ [2]uintptr }

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
	cleanup runtime.Cleanup // owned imports: the safety net
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

type importKind uint8

const (
	importAssumeWritable importKind = iota + 1
	importHostMemory
	importDataType
	importNDim
	importDevice
	importWritable
	importContiguous
)

// ImportOption states an assumption or a requirement of an import. A tensor
// that fails a requirement is released and the error wraps ErrRequirement.
// The zero value does nothing.
type ImportOption struct {
	kind importKind
	dt   DataType
	n    int
	dev  Device
}

// AssumeWritable lets legacy tensors, which carry no read-only flag, be
// viewed writable. Without it they are read-only (NumPy's rule). It has no
// effect on versioned tensors, whose flag decides.
func AssumeWritable() ImportOption { return ImportOption{kind: importAssumeWritable} }

// AllowHostMemory allows CPU views of host-accessible device memory
// (CUDAHost, ROCMHost, TPUHost, CUDAManaged). Without it only CPU tensors can be
// viewed from Go. The caller is responsible for stream synchronisation.
func AllowHostMemory() ImportOption { return ImportOption{kind: importHostMemory} }

// RequireDataType requires the tensor's data type to be dt.
func RequireDataType(dt DataType) ImportOption { return ImportOption{kind: importDataType, dt: dt} }

// RequireNDim requires the tensor to have n dimensions.
func RequireNDim(n int) ImportOption { return ImportOption{kind: importNDim, n: n} }

// RequireDevice requires the tensor to live on d.
func RequireDevice(d Device) ImportOption { return ImportOption{kind: importDevice, dev: d} }

// RequireWritable requires a tensor that may be written (not read-only; for
// legacy tensors, AssumeWritable must also be given).
func RequireWritable() ImportOption { return ImportOption{kind: importWritable} }

// RequireContiguous requires a compact row-major tensor.
func RequireContiguous() ImportOption { return ImportOption{kind: importContiguous} }

// Import takes ownership of a DLManagedTensorVersioned at p and validates it.
//
// The major version is checked before any other field is read. On any error
// the tensor is released at once (its deleter called, unless NULL) and the
// error wraps a sentinel (ErrVersion, ErrShape, ErrDataType, ...) and names
// the field and value; the caller must not touch p again either way. A nil
// p returns ErrNilPointer.
//
// On success the caller owns the returned Foreign and should Close it; a
// Foreign that becomes unreachable unclosed is released by a cleanup and
// counted in Stats.LeakedImports.
func Import(p unsafe.Pointer, opts ...ImportOption) (Foreign, error) {
	return importOwned(p, false, opts)
}

// ImportLegacy is Import for a pre-1.0 DLManagedTensor. It has no version
// and no flags: NULL strides mean compact row-major, and the data is
// read-only unless AssumeWritable is given.
func ImportLegacy(p unsafe.Pointer, opts ...ImportOption) (Foreign, error) {
	return importOwned(p, true, opts)
}

// leakArg is what the cleanup of an owned import needs: the state and the
// generation it was imported as. It must not refer to the owner, or the
// owner would never become unreachable (the state does not).
type leakArg struct {
	s   *foreignState
	gen uint32
}

// releaseLeaked is the safety net: the owner of an import that was never
// closed has become unreachable.
func releaseLeaked(a leakArg) {
	if a.s.claim(a.gen) {
		leakedImports.Add(1)
		a.s.drop()
	}
}

func importOwned(p unsafe.Pointer, legacy bool, opts []ImportOption) (Foreign, error) {
	s := takeState()
	if err := s.load(p, legacy, opts); err != nil {
		s.recycle()
		return Foreign{}, err
	}
	gen := s.gen()
	o := new(owner)
	s.cleanup = runtime.AddCleanup(o, releaseLeaked, leakArg{s, gen})
	s.owned = true
	return Foreign{s: s, own: o, gen: gen}, nil
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

// Borrow imports the DLManagedTensorVersioned at p for the duration of fn:
// it validates the tensor like Import, calls fn, and releases the tensor
// when fn returns (or panics). It allocates nothing and registers no
// cleanup, which makes it the fastest way to consume a tensor.
//
// The Foreign passed to fn, and every slice or view made from it, is valid
// only until fn returns; afterwards the handle reads as closed. fn may
// Close it early. On a validation error fn is not called, the tensor is
// released, and the error is returned; otherwise Borrow returns fn's error.
func Borrow(p unsafe.Pointer, fn func(Foreign) error, opts ...ImportOption) error {
	return borrow(p, false, fn, opts)
}

// BorrowLegacy is Borrow for a pre-1.0 DLManagedTensor.
func BorrowLegacy(p unsafe.Pointer, fn func(Foreign) error, opts ...ImportOption) error {
	return borrow(p, true, fn, opts)
}

func borrow(p unsafe.Pointer, legacy bool, fn func(Foreign) error, opts []ImportOption) error {
	s := takeState()
	if err := s.load(p, legacy, opts); err != nil {
		s.recycle() // load released the tensor, and no handle to it exists
		return err
	}
	defer s.endScope()
	return fn(Foreign{s: s, gen: s.gen()})
}

// BorrowTensor views the bare DLTensor at p (a borrowed DLTensor*, with
// no manager and no deleter, as TVM-style packed calls and the DLPack 1.3
// exchange API's dltensor_from_py_object_no_sync pass one) for the
// duration of fn: it checks every field as Import does, calls fn, and ends
// the view when fn returns (or panics). Nothing is released: the tensor
// stays its lender's, who must keep it (struct, shape, strides and data)
// valid until fn returns. It allocates nothing.
//
// A DLTensor carries no version and no flags, so the view reads as a
// legacy tensor does: read-only unless AssumeWritable is given (the
// lender's word that writing is allowed), NULL strides meaning compact
// row-major, Legacy reporting true. The Foreign passed to fn, and every
// slice or view made from it, is valid only until fn returns, and cannot
// be handed on (ErrBorrowed, as for Borrow). On a validation error fn is
// not called and the error is returned; otherwise BorrowTensor returns
// fn's error.
func BorrowTensor(p unsafe.Pointer, fn func(Foreign) error, opts ...ImportOption) error {
	s := takeState()
	if err := s.loadTensor(p, opts); err != nil {
		s.recycle()
		return err
	}
	defer s.endScope()
	return fn(Foreign{s: s, gen: s.gen()})
}

// BorrowBatch is Borrow for many tensors at once: it takes over every
// DLManagedTensorVersioned in ps, validates each like Import, sets fs[i] to
// the handle of ps[i], calls fn(fs[:len(ps)]), and when fn returns (or
// panics) releases every tensor fn did not Close, calling the producers'
// deleters in one crossing into C instead of one each. It allocates
// nothing. With a C producer that hands over many tensors per call, it is
// the cheapest way to consume them.
//
// fs is the caller's storage for the handles; BorrowBatch panics, before
// taking anything over, if it is shorter than ps. The handles, and every
// slice or view made from them, are valid only until fn returns;
// afterwards they read as closed. ps must not name the same tensor twice.
//
// If any tensor fails validation, fn is not called, every tensor in ps is
// released (those after the bad one unread, by their deleter fields), and
// the error names the index as ps[i] in its field.
func BorrowBatch(ps []unsafe.Pointer, fs []Foreign, fn func([]Foreign) error, opts ...ImportOption) error {
	return borrowBatch(ps, fs, false, fn, opts)
}

// BorrowBatchLegacy is BorrowBatch for pre-1.0 DLManagedTensors.
func BorrowBatchLegacy(ps []unsafe.Pointer, fs []Foreign, fn func([]Foreign) error, opts ...ImportOption) error {
	return borrowBatch(ps, fs, true, fn, opts)
}

// batch is the pooled bookkeeping of a BorrowBatch. It keeps its own
// import states for reuse by its next batch: taking 64 states from
// statePool and putting them back costs more than validating them.
type batch struct {
	states     []*foreignState // the first n serve a batch of n tensors
	fns, selfs []uintptr
}

var batchPool = sync.Pool{New: func() any { return new(batch) }}

func borrowBatch(ps []unsafe.Pointer, fs []Foreign, legacy bool, fn func([]Foreign) error, opts []ImportOption) error {
	if len(fs) < len(ps) {
		panic("dlpack: BorrowBatch needs len(fs) >= len(ps), got " + strconv.Itoa(len(fs)) + " < " + strconv.Itoa(len(ps)))
	}
	b := batchPool.Get().(*batch)
	for len(b.states) < len(ps) {
		b.states = append(b.states, newState())
	}
	for i, p := range ps {
		s := b.states[i]
		if err := s.load(p, legacy, opts); err != nil {
			s.dropRefs()
			b.end(i)
			releaseUnread(ps[i+1:], legacy)
			return prefixed(err, "ps["+strconv.Itoa(i)+"].")
		}
		fs[i] = Foreign{s: s, gen: s.gen()}
	}
	defer b.end(len(ps))
	return fn(fs[:len(ps)])
}

// end ends the scope of the batch's first n tensors: what fn did not
// close is released, C deleters all in one call; then the batch goes back
// to its pool.
func (b *batch) end(n int) {
	for _, s := range b.states[:n] {
		if !s.endClaim() {
			continue
		}
		if s.goBlock != nil {
			releaseGoBlock(s.goBlock, s.goRec)
		} else {
			b.fns = append(b.fns, s.deleter)
			b.selfs = append(b.selfs, s.self)
		}
	}
	callDeleters(b.fns, b.selfs)
	for _, s := range b.states[:n] {
		s.dropRefs()
	}
	b.fns, b.selfs = b.fns[:0], b.selfs[:0]
	batchPool.Put(b)
}

// releaseUnread releases tensors that were handed over but not validated,
// through the deleter field alone (at the same place in every major
// version of DLManagedTensorVersioned, and in DLManagedTensor).
func releaseUnread(ps []unsafe.Pointer, legacy bool) {
	var fns, selfs []uintptr
	for _, p := range ps {
		if p == nil {
			continue
		}
		d := (*ManagedTensorVersioned)(p).Deleter
		if legacy {
			d = (*ManagedTensor)(p).Deleter
		}
		fns, selfs = append(fns, d), append(selfs, uintptr(p))
	}
	callDeleters(fns, selfs)
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
	s.goBase, s.goBlock, s.goRec, s.owner = nil, nil, nil, nil
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
		s.cleanup.Stop() // a no-op for the zero Cleanup of a Go-to-Go import without one
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

// load validates the managed tensor at p and takes ownership of it; on
// error it has already released it.
func (s *foreignState) load(p unsafe.Pointer, legacy bool, opts []ImportOption) error {
	if p == nil {
		return fieldErr(ErrNilPointer, "managed tensor", "NULL", "")
	}
	if !cgoEnabled {
		return ErrCgoRequired
	}
	var (
		t       *Tensor
		version Version
		flags   Flags
	)
	if legacy {
		m := (*ManagedTensor)(p)
		s.deleter, t = m.Deleter, &m.DLTensor
	} else {
		m := (*ManagedTensorVersioned)(p)
		s.deleter = m.Deleter
		// The major version decides the layout of everything after flags.
		if v := m.Version; v.Major != MajorVersion {
			// Build the error before the deleter frees the struct.
			err := fieldErr(ErrVersion, "version.major", v.Major, "this package reads major version 1 (tensor is "+v.String()+")")
			callDeleter(s.deleter, uintptr(p))
			return err
		}
		version, flags, t = m.Version, m.Flags, &m.DLTensor
	}
	dims := s.dims[:]
	if n := int(t.NDim); n > len(s.dims)/2 && n <= MaxNDim {
		if cap(s.extra) < 2*n {
			s.extra = make([]int64, 2*n)
		}
		dims = s.extra
	}
	err := checkTensor(&s.c, t, version, flags, legacy, dims)
	if err == nil {
		err = s.settle(p, legacy, opts)
	}
	if err != nil {
		callDeleter(s.deleter, uintptr(p))
		return err
	}
	s.self = uintptr(p)
	s.holds.Store(1)
	return nil
}

// loadTensor validates the bare DLTensor at p, which has no deleter: the
// state's release does nothing.
func (s *foreignState) loadTensor(p unsafe.Pointer, opts []ImportOption) error {
	if p == nil {
		return fieldErr(ErrNilPointer, "DLTensor", "NULL", "")
	}
	if !cgoEnabled {
		return ErrCgoRequired
	}
	t := (*Tensor)(p)
	dims := s.dims[:]
	if n := int(t.NDim); n > len(s.dims)/2 && n <= MaxNDim {
		if cap(s.extra) < 2*n {
			s.extra = make([]int64, 2*n)
		}
		dims = s.extra
	}
	s.deleter = 0
	if err := checkTensor(&s.c, t, Version{}, 0, true, dims); err != nil {
		return err
	}
	if err := s.settle(p, true, opts); err != nil {
		return err
	}
	s.self = uintptr(p)
	s.holds.Store(1)
	return nil
}

// settle applies the options and recognises this package's own exports.
func (s *foreignState) settle(p unsafe.Pointer, legacy bool, opts []ImportOption) error {
	c := &s.c
	c.writable = c.flags&FlagReadOnly == 0
	if legacy {
		c.writable = hasOption(opts, importAssumeWritable)
	}
	s.hostOK = c.device.Type == CPU || (hasOption(opts, importHostMemory) && c.device.Type.HostAccessible())
	for _, o := range opts {
		switch o.kind {
		case importDataType:
			if c.dtype != o.dt {
				return fieldErr(ErrRequirement, "dl_tensor.dtype", c.dtype, "required "+o.dt.String())
			}
		case importNDim:
			if c.ndim != o.n {
				return fieldErr(ErrRequirement, "dl_tensor.ndim", c.ndim, "required "+strconv.Itoa(o.n))
			}
		case importDevice:
			if c.device != o.dev {
				return fieldErr(ErrRequirement, "dl_tensor.device", c.device, "required "+o.dev.String())
			}
		case importWritable:
			if !c.writable {
				why := "tensor is read-only"
				if legacy {
					why = "legacy tensors are read-only unless AssumeWritable is given"
				}
				return fieldErr(ErrRequirement, "flags", c.flags, why)
			}
		case importContiguous:
			if !c.contiguous {
				return fieldErr(ErrRequirement, "dl_tensor.strides", clone(c.strides), "required compact row-major")
			}
		}
	}
	if s.deleter != 0 && (s.deleter == deleterGoVersioned || s.deleter == deleterGoLegacy) {
		return s.adoptGoExport(p)
	}
	return nil
}

// adoptGoExport handles a Go-memory export of this package coming back.
// Views must be derived from the pinned Go object itself, not from its
// address, because turning an integer back into a Go pointer is invalid
// (checkptr rejects it). And the release can be done in Go, without
// calling the C deleter that would call back into Go.
func (s *foreignState) adoptGoExport(p unsafe.Pointer) error {
	pre := (*prefix)(unsafe.Add(p, -int(unsafe.Sizeof(prefix{}))))
	var rec *exportRecord
	if pre.magic == magicGo {
		rec, _ = lookupExport(uintptr(pre.handle), pre.gen)
	}
	if rec == nil || (rec.base == nil && s.c.numel > 0 && s.c.device.Type == CPU) {
		return fieldErr(ErrCorrupt, "manager_ctx", uintptr(pre.handle), "names no live Go export of this package")
	}
	s.goBlock, s.goRec = unsafe.Pointer(pre), rec
	c := &s.c
	if c.numel == 0 || rec.base == nil {
		return nil // empty, or device memory: no Go views
	}
	lo, hi, _ := c.byteSpan(c.dtype, false)
	start := uintptr(rec.base)
	if int64(c.data-start) < -lo || c.data-start+uintptr(hi) > rec.size {
		return fieldErr(ErrCorrupt, "dl_tensor.data", c.data, "outside the exported Go memory")
	}
	s.goBase, s.goOff = rec.base, c.data-start
	return nil
}

func hasOption(opts []ImportOption, k importKind) bool {
	for _, o := range opts {
		if o.kind == k {
			return true
		}
	}
	return false
}
