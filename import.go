package dlpack

import (
	"strconv"
	"sync"
	"unsafe"
)

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
// counted in Stats.LeakedImports, once the Foreigns of the imports that
// share its cleanup (at most 64, made around it, mostly on the same
// goroutine) are unreachable too.
func Import(p unsafe.Pointer, opts ...ImportOption) (Foreign, error) {
	return importOwned(p, false, opts)
}

// ImportLegacy is Import for a pre-1.0 DLManagedTensor. It has no version
// and no flags: NULL strides mean compact row-major, and the data is
// read-only unless AssumeWritable is given.
func ImportLegacy(p unsafe.Pointer, opts ...ImportOption) (Foreign, error) {
	return importOwned(p, true, opts)
}

func importOwned(p unsafe.Pointer, legacy bool, opts []ImportOption) (Foreign, error) {
	s := takeState()
	if err := s.load(p, legacy, opts); err != nil {
		s.recycle()
		return Foreign{}, err
	}
	gen := s.gen()
	s.owned = true
	var o *owner
	if s.goRec == nil {
		o = slabOwner(s, gen) // a C tensor: the state refers to nothing of the caller's
	} else {
		o = ownOwner(s, gen) // an export of ours: its record keeps the caller's Owner
	}
	return Foreign{s: s, own: o, gen: gen}, nil
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
	// No handle to the state exists yet, and its last holder let go of it
	// before it was recycled: nothing else can read holds now, so a plain
	// store does (an atomic one is a locked exchange on amd64, measurably
	// part of Import + Close).
	*(*int32)(unsafe.Pointer(&s.holds)) = 1
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
