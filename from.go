package dlpack

import (
	"fmt"
	"unsafe"

	"github.com/godlpack/dlpack/internal/nilcheck"
)

// From takes any Producer's tensor as a Foreign, sending the zero Request
// (RequireWritable among opts makes it a writing request).
//
// A Source (Array, Buffer, Foreign, the bridges' types) is taken Go to Go:
// no C block, no pinning, no handle and no call into C; its Owner is kept
// by the Foreign and released at Close. Other producers are asked through
// DLPack and their tensor imported as Import does. The options apply as
// for Import. On error nothing is held: a tensor that a producer's DLPack
// returned together with an error (which breaks the Producer contract) is
// released. A nil p, or a nil pointer (a typed nil such as a nil *Array),
// is refused with an error wrapping ErrNilPointer.
func From(p Producer, opts ...ImportOption) (Foreign, error) {
	req := Request{MaxVersion: CurrentVersion}
	if len(opts) > 0 && hasOption(opts, importWritable) {
		req.Writable = true
	}
	return fromAny(p, &req, opts)
}

// FromRequest is From with the request stated: a copy forced or forbidden,
// a stream, a legacy tensor.
func FromRequest(p Producer, req Request, opts ...ImportOption) (Foreign, error) {
	return fromAny(p, &req, opts)
}

func fromAny(p Producer, req *Request, opts []ImportOption) (Foreign, error) {
	if a, ok := p.(goArray); ok {
		return fromArray(a, req, opts) // a nil *Array is refused there
	}
	if nilcheck.IsNil(p) {
		return Foreign{}, nilProducer(p)
	}
	if src, ok := p.(Source); ok {
		return fromSource(src, req, opts)
	}
	return fromProducer(p, req, opts)
}

// nilProducer is the error for a nil producer or source: nil, or a nil
// pointer, whose methods would panic on it.
func nilProducer(p any) error {
	v := "nil"
	if p != nil {
		v = fmt.Sprintf("(%T)(nil)", p)
	}
	return fieldErr(ErrNilPointer, "producer", v, "")
}

// fromProducer asks a Producer that is not a Source for its tensor and
// imports it.
func fromProducer(p Producer, req *Request, opts []ImportOption) (Foreign, error) {
	m, err := p.DLPack(*req)
	if err != nil {
		// A producer returns no tensor with an error; one that did broke
		// the contract, and the tensor is ours to release.
		m.Close()
		return Foreign{}, err
	}
	if m.Pointer() == nil {
		return Foreign{}, fieldErr(ErrNilPointer, "managed tensor", "NULL", "the producer returned no tensor and no error")
	}
	return m.Import(opts...)
}

// nativeOwner stands in for the owner of Go-to-Go imports whose source
// needs no release: Close then goes the owned way, with no safety net to
// stop.
var nativeOwner = new(owner)

// fromSource is the Go-to-Go path of From.
func fromSource(src Source, req *Request, opts []ImportOption) (Foreign, error) {
	s := takeState()
	d := &s.desc
	if err := src.DescribeTensor(d); err != nil {
		*d = Description{}
		s.recycle()
		return Foreign{}, err
	}
	o := d.Owner
	var err error
	if cd := d.Checked; cd != nil {
		s.useChecked(cd)
		d = &cd.d
	} else {
		err = checkDescription(&s.c, d, s.dims[:])
	}
	var copyData bool
	if err == nil {
		copyData, err = negotiate(&s.c, req, hostReadable(d, &s.c))
	}
	if err == nil && !copyData {
		s.deleter, s.self = 0, 0
		err = s.settle(nil, false, opts)
	}
	if err != nil || copyData {
		data, byteOff := d.Data, d.ByteOffset
		s.desc = Description{}
		c := s.c
		s.recycle()
		if err != nil {
			releaseOwner(o)
			return Foreign{}, err
		}
		// A copy: made by the C path, then imported like any tensor.
		if !cgoEnabled {
			releaseOwner(o)
			return Foreign{}, ErrCgoRequired
		}
		var first unsafe.Pointer
		if c.numel > 0 {
			first = unsafe.Add(data, byteOff)
		}
		p, err := exportCopy(&c, first, req.IsLegacy())
		releaseOwner(o)
		if err != nil {
			return Foreign{}, err
		}
		return managedOf(p, req.IsLegacy()).Import(opts...)
	}
	if s.c.numel > 0 && d.Data != nil {
		s.goBase, s.goOff = unsafe.Add(d.Data, d.ByteOffset), 0
	}
	s.desc = Description{}
	s.native, s.owned, s.owner = true, true, o
	s.holds.Store(1)
	gen := s.gen()
	own := nativeOwner
	if _, ok := o.(Releaser); ok {
		s.releases = true
		own = ownOwner(s, gen)
	}
	return Foreign{s: s, own: own, gen: gen}, nil
}

// goArray is implemented by *Array[T]: From takes an Array into the
// import's state directly, with the checks a Description gets but without
// building one, and without the checks its type settles (a valid element
// type, CPU memory, an owner with nothing to release).
type goArray interface {
	Source
	// describeInto fills c with the checked tensor and returns the
	// address of Data, as DescribeTensor and checkDescription would.
	describeInto(c *checked, dims []int64) (unsafe.Pointer, error)
}

// fromArray is From's path for an Array: fromSource without the
// Description.
func fromArray(a goArray, req *Request, opts []ImportOption) (Foreign, error) {
	s := takeState()
	data, err := a.describeInto(&s.c, s.dims[:])
	var copyData bool
	if err == nil {
		copyData, err = negotiate(&s.c, req, true) // an accepted Array is in Go memory, or empty
	}
	if err == nil && !copyData {
		s.deleter, s.self = 0, 0
		if len(opts) == 0 {
			s.hostOK = true // what settle decides for Go memory without options
		} else {
			err = s.settle(nil, false, opts)
		}
	}
	if err != nil || copyData {
		s.recycle()
		if err != nil {
			return Foreign{}, err
		}
		return fromSource(a, req, opts) // a copy: the general path
	}
	if s.c.numel > 0 {
		s.goBase, s.goOff = unsafe.Add(data, s.c.data-s.c.rawData), 0
	}
	s.native, s.owned, s.owner = true, true, a
	s.holds.Store(1)
	return Foreign{s: s, own: nativeOwner, gen: s.gen()}, nil
}

// useChecked fills the state's checks from a checked description, with
// the shape and strides in the state's own storage.
func (s *foreignState) useChecked(cd *CheckedDescription) {
	s.c = cd.c
	if n := cd.c.ndim; 2*n <= len(s.dims) {
		copy(s.dims[:n], cd.c.shape)
		copy(s.dims[n:2*n], cd.c.strides)
		s.c.shape, s.c.strides = s.dims[:n:n], s.dims[n:2*n:2*n]
	}
}
