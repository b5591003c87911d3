package dloip

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/godlpack/dlpack/dloip/internal/pb"
	"github.com/godlpack/dlpack/internal/fault"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Triton's system shared-memory extension: a client on the same host
// registers a region (a POSIX shared-memory object, by its key, and a
// span of it) and then names a region, an offset and a byte size for an
// input or an output instead of sending its bytes.

// The tensor parameters of the extension.
const (
	ParamRegion   = "shared_memory_region"
	ParamByteSize = "shared_memory_byte_size"
	ParamOffset   = "shared_memory_offset"
)

// shmDir is where POSIX shared-memory objects live (shm_open's names).
var shmDir = "/dev/shm"

// region is a registered span of a shared-memory object, mapped.
type region struct {
	name, key    string
	offset, size uint64
	mapping      []byte // the pages mapped
	data         []byte // the region within them
	// refs: the registration's and one per tensor or write in flight;
	// the last drop unmaps.
	refs atomic.Int64
}

func (r *region) drop() {
	if r.refs.Add(-1) == 0 {
		syscall.Munmap(r.mapping)
	}
}

// span checks [off, off+n) against the region (field names the input or
// output) and returns it.
func (r *region) span(field string, off, n uint64) ([]byte, error) {
	if off > r.size || n > r.size-off {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: %s: offset %d and byte size %d lie outside shared-memory region %q of %d bytes", field, off, n, r.name, r.size)
	}
	return r.data[off : off+n], nil
}

// mapRegion maps byteSize bytes at offset of the shared-memory object
// key, after checking that the object holds them (a page past its end
// would fault when touched).
func mapRegion(name, key string, offset, byteSize uint64) (*region, error) {
	k := strings.TrimPrefix(key, "/")
	if k == "" || strings.ContainsAny(k, "/\x00") || k == "." || k == ".." {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: key %q is not the name of a shared-memory object", name, key)
	}
	if byteSize == 0 || byteSize > 1<<46 || offset > 1<<46 {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: byte size %d at offset %d", name, byteSize, offset)
	}
	f, err := os.OpenFile(shmDir+"/"+k, os.O_RDWR, 0)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: key %q: %v", name, key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dloip: shared-memory region %q: %v", name, err)
	}
	if uint64(st.Size()) < offset+byteSize {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: offset %d and byte size %d lie outside object %q of %d bytes", name, offset, byteSize, key, st.Size())
	}
	page := uint64(os.Getpagesize())
	start := offset / page * page
	m, err := syscall.Mmap(int(f.Fd()), int64(start), int(offset-start+byteSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dloip: shared-memory region %q: map: %v", name, err)
	}
	r := &region{name: name, key: key, offset: offset, size: byteSize, mapping: m, data: m[offset-start:]}
	r.refs.Store(1)
	return r, nil
}

// SystemSharedMemoryRegister implements the extension.
func (v service) SystemSharedMemoryRegister(_ context.Context, q *pb.SystemSharedMemoryRegisterRequest) (*pb.SystemSharedMemoryRegisterResponse, error) {
	s := v.s
	if q.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "dloip: a shared-memory region needs a name")
	}
	s.mu.RLock()
	_, dup := s.regions[q.GetName()]
	s.mu.RUnlock()
	if dup {
		return nil, status.Errorf(codes.AlreadyExists, "dloip: shared-memory region %q is already registered", q.GetName())
	}
	r, err := mapRegion(q.GetName(), q.GetKey(), q.GetOffset(), q.GetByteSize())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if _, dup := s.regions[r.name]; dup {
		s.mu.Unlock()
		r.drop()
		return nil, status.Errorf(codes.AlreadyExists, "dloip: shared-memory region %q is already registered", q.GetName())
	}
	s.regions[r.name] = r
	s.mu.Unlock()
	return &pb.SystemSharedMemoryRegisterResponse{}, nil
}

// SystemSharedMemoryUnregister implements the extension: a region (every
// region for the name "") is unmapped; one still used by a running
// request or a tensor a model kept is not, and the call fails with
// codes.FailedPrecondition.
func (v service) SystemSharedMemoryUnregister(_ context.Context, q *pb.SystemSharedMemoryUnregisterRequest) (*pb.SystemSharedMemoryUnregisterResponse, error) {
	s := v.s
	s.mu.Lock()
	var names []string
	if q.GetName() == "" {
		for n := range s.regions {
			names = append(names, n)
		}
	} else if _, ok := s.regions[q.GetName()]; ok {
		names = []string{q.GetName()}
	}
	var busy []string
	var gone []*region
	for _, n := range names {
		r := s.regions[n]
		if r.refs.Load() > 1 {
			busy = append(busy, n)
			continue
		}
		delete(s.regions, n)
		gone = append(gone, r)
	}
	s.mu.Unlock()
	for _, r := range gone {
		r.drop()
	}
	if len(busy) > 0 {
		sort.Strings(busy)
		return nil, status.Errorf(codes.FailedPrecondition, "dloip: shared-memory regions %q are in use by a request or its tensors; unregister them when it ends", busy)
	}
	return &pb.SystemSharedMemoryUnregisterResponse{}, nil
}

// SystemSharedMemoryStatus implements the extension.
func (v service) SystemSharedMemoryStatus(_ context.Context, q *pb.SystemSharedMemoryStatusRequest) (*pb.SystemSharedMemoryStatusResponse, error) {
	s := v.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &pb.SystemSharedMemoryStatusResponse{Regions: map[string]*pb.SystemSharedMemoryStatusResponse_RegionStatus{}}
	for n, r := range s.regions {
		if q.GetName() == "" || q.GetName() == n {
			out.Regions[n] = &pb.SystemSharedMemoryStatusResponse_RegionStatus{Name: n, Key: r.key, Offset: r.offset, ByteSize: r.size}
		}
	}
	if q.GetName() != "" && len(out.Regions) == 0 {
		return nil, status.Errorf(codes.NotFound, "dloip: no shared-memory region %q", q.GetName())
	}
	return out, nil
}

// acquireRegion takes a reference to the region name for a tensor.
func (s *Server) acquireRegion(field, name string) (*region, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.regions[name]
	if r == nil {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: %s: no shared-memory region %q is registered", field, name)
	}
	r.refs.Add(1)
	return r, nil
}

// shmParams reads a tensor's shared-memory parameters: ok false when it
// names no region.
func shmParams(field string, params map[string]*pb.InferParameter) (name string, off, n uint64, ok bool, err error) {
	p, has := params[ParamRegion]
	if !has {
		return "", 0, 0, false, nil
	}
	name = p.GetStringParam()
	if name == "" {
		return "", 0, 0, false, status.Errorf(codes.InvalidArgument, "dloip: %s: %s must be a region's name", field, ParamRegion)
	}
	uint := func(key string, required bool) (uint64, error) {
		q, has := params[key]
		if !has {
			if required {
				return 0, status.Errorf(codes.InvalidArgument, "dloip: %s: %s is required with %s", field, key, ParamRegion)
			}
			return 0, nil
		}
		switch v := q.GetParameterChoice().(type) {
		case *pb.InferParameter_Int64Param:
			if v.Int64Param < 0 {
				return 0, status.Errorf(codes.InvalidArgument, "dloip: %s: %s = %d", field, key, v.Int64Param)
			}
			return uint64(v.Int64Param), nil
		case *pb.InferParameter_Uint64Param:
			return v.Uint64Param, nil
		}
		return 0, status.Errorf(codes.InvalidArgument, "dloip: %s: %s must be an integer", field, key)
	}
	if n, err = uint(ParamByteSize, true); err != nil {
		return "", 0, 0, false, err
	}
	if off, err = uint(ParamOffset, false); err != nil {
		return "", 0, 0, false, err
	}
	return name, off, n, true, nil
}

// regionTensor makes an input that lies in a region: the registered
// memory itself, read-only, holding the region until released.
func (s *Server) regionTensor(w wireTensor, name string, off, n uint64) (*Tensor, error) {
	field := fmt.Sprintf("input %q", w.name)
	r, err := s.acquireRegion(field, name)
	if err != nil {
		return nil, err
	}
	b, err := r.span(field, off, n)
	if err != nil {
		r.drop()
		return nil, err
	}
	t, err := newTensor("input", w.name, w.datatype, w.shape, b, r.drop)
	if err != nil {
		r.drop()
		return nil, err
	}
	t.readOnly = true
	t.params = paramsOf(w.params)
	return t, nil
}

// writeRegion writes an output's bytes into the region its requested
// output names, if it names one (ok false otherwise): one copy, from the
// model's output into the client's memory. The region's byte size must
// hold the output.
func (s *Server) writeRegion(name string, params map[string]*pb.InferParameter, data []byte) (ok bool, err error) {
	field := fmt.Sprintf("output %q", name)
	rname, off, n, ok, err := shmParams(field, params)
	if !ok || err != nil {
		return false, err
	}
	if uint64(len(data)) > n {
		return false, status.Errorf(codes.InvalidArgument, "dloip: %s: %s = %d, but the output has %d bytes", field, ParamByteSize, n, len(data))
	}
	r, err := s.acquireRegion(field, rname)
	if err != nil {
		return false, err
	}
	defer r.drop()
	b, err := r.span(field, off, n)
	if err != nil {
		return false, err
	}
	// The object may have been cut short since it was registered: a
	// write past its end faults, which the guard turns into an error.
	err = fault.Guard(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), func() error {
		copy(b, data)
		return nil
	})
	if fe, ok := err.(*fault.Error); ok {
		return false, status.Errorf(codes.Internal, "dloip: %s: shared-memory region %q: byte %d: %v (its object was cut short)", field, rname, fe.Offset, ErrTruncated)
	}
	return true, err
}
