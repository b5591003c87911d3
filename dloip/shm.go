package dloip

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dloip/internal/pb"
	"github.com/godlpack/dlpack/internal/fault"
	"golang.org/x/sys/unix"
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
	principal    string // who registered it: the only one who may use it
	offset, size uint64
	mapping      []byte // the pages mapped
	data         []byte // the region within them
	// refs: the registration's and one per tensor or write in flight;
	// the last drop unmaps.
	refs atomic.Int64
}

func (r *region) drop() {
	if r.refs.Add(-1) == 0 {
		_ = unix.Munmap(r.mapping)
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

// openObject opens the shared-memory object key, which must name a
// regular file directly in shmDir, owned by this process's effective
// user and writable by no one else: the key is one name, no "/", "."
// or ".."; the file is opened without following a link (O_NOFOLLOW) and
// without blocking on a FIFO (O_NONBLOCK), relative to the directory,
// itself opened without following a link; its kind, owner and mode are
// checked on the opened file, so that nothing can be swapped in between.
func openObject(name, key string) (*os.File, error) {
	bad := func(why string) error {
		return status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: key %q: %s", name, key, why)
	}
	k := strings.TrimPrefix(key, "/")
	if k == "" || strings.ContainsAny(k, "/\x00") || k == "." || k == ".." {
		return nil, bad("not the name of a shared-memory object (one name, as shm_open takes it)")
	}
	dir, err := unix.Open(shmDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dloip: shared-memory region %q: %s: %v", name, shmDir, err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, k, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		switch err {
		case unix.ELOOP:
			return nil, bad("a symbolic link, which is not followed")
		case unix.EISDIR:
			return nil, bad("not a regular file (a directory)")
		}
		return nil, bad(err.Error())
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, status.Errorf(codes.Internal, "dloip: shared-memory region %q: %v", name, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		unix.Close(fd)
		return nil, bad(fmt.Sprintf("not a regular file (mode %#o)", st.Mode&unix.S_IFMT))
	case int(st.Uid) != os.Geteuid():
		unix.Close(fd)
		return nil, bad(fmt.Sprintf("owned by user %d, not by the server's (%d)", st.Uid, os.Geteuid()))
	case st.Mode&0o022 != 0:
		unix.Close(fd)
		return nil, bad(fmt.Sprintf("mode %#o lets others write it", st.Mode&0o777))
	}
	return os.NewFile(uintptr(fd), shmDir+"/"+k), nil
}

// mapRegion maps byteSize bytes at offset of the shared-memory object
// key, after checking that the object holds them (a page past its end
// would fault when touched).
func mapRegion(name, key string, offset, byteSize uint64) (*region, error) {
	if byteSize == 0 || byteSize > 1<<46 || offset > 1<<46 {
		return nil, status.Errorf(codes.InvalidArgument, "dloip: shared-memory region %q: byte size %d at offset %d", name, byteSize, offset)
	}
	f, err := openObject(name, key)
	if err != nil {
		return nil, err
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
	m, err := unix.Mmap(int(f.Fd()), int64(start), int(offset-start+byteSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dloip: shared-memory region %q: map: %v", name, err)
	}
	r := &region{name: name, key: key, offset: offset, size: byteSize, mapping: m, data: m[offset-start:]}
	r.refs.Store(1)
	return r, nil
}

// SystemSharedMemoryRegister implements the extension. A region belongs
// to the principal that registered it: only that principal may list,
// use or unregister it.
func (v service) SystemSharedMemoryRegister(ctx context.Context, q *pb.SystemSharedMemoryRegisterRequest) (*pb.SystemSharedMemoryRegisterResponse, error) {
	s := v.s
	if q.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "dloip: a shared-memory region needs a name")
	}
	if err := s.srv.Allowed(ctx, dlgrpc.OpSharedMemory, q.GetName()); err != nil {
		return nil, err
	}
	room := func() error {
		if _, dup := s.regions[q.GetName()]; dup {
			return status.Errorf(codes.AlreadyExists, "dloip: shared-memory region %q is already registered", q.GetName())
		}
		if len(s.regions) >= s.opts.MaxRegions {
			return status.Errorf(codes.ResourceExhausted, "dloip: %v: the server holds its %d shared-memory regions (MaxRegions)", ErrLimit, s.opts.MaxRegions)
		}
		return nil
	}
	s.mu.RLock()
	err := room()
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	r, err := mapRegion(q.GetName(), q.GetKey(), q.GetOffset(), q.GetByteSize())
	if err != nil {
		return nil, err
	}
	r.principal = dlgrpc.Principal(ctx)
	s.mu.Lock()
	if err := room(); err != nil {
		s.mu.Unlock()
		r.drop()
		return nil, err
	}
	s.regions[r.name] = r
	s.mu.Unlock()
	return &pb.SystemSharedMemoryRegisterResponse{}, nil
}

// SystemSharedMemoryUnregister implements the extension: a region (every
// region of the caller's for the name "") is unmapped; one still used by
// a running request or a tensor a model kept is not, and the call fails
// with codes.FailedPrecondition.
func (v service) SystemSharedMemoryUnregister(ctx context.Context, q *pb.SystemSharedMemoryUnregisterRequest) (*pb.SystemSharedMemoryUnregisterResponse, error) {
	s := v.s
	if q.GetName() != "" {
		if err := s.srv.Allowed(ctx, dlgrpc.OpSharedMemory, q.GetName()); err != nil {
			return nil, err
		}
	}
	p := dlgrpc.Principal(ctx)
	s.mu.Lock()
	var names []string
	if q.GetName() == "" {
		for n, r := range s.regions {
			if r.principal == p {
				names = append(names, n)
			}
		}
	} else if r, ok := s.regions[q.GetName()]; ok && r.principal == p {
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

// SystemSharedMemoryStatus implements the extension: the caller's
// regions.
func (v service) SystemSharedMemoryStatus(ctx context.Context, q *pb.SystemSharedMemoryStatusRequest) (*pb.SystemSharedMemoryStatusResponse, error) {
	s := v.s
	if q.GetName() != "" {
		if err := s.srv.Allowed(ctx, dlgrpc.OpSharedMemory, q.GetName()); err != nil {
			return nil, err
		}
	}
	p := dlgrpc.Principal(ctx)
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &pb.SystemSharedMemoryStatusResponse{Regions: map[string]*pb.SystemSharedMemoryStatusResponse_RegionStatus{}}
	for n, r := range s.regions {
		if r.principal == p && (q.GetName() == "" || q.GetName() == n) {
			out.Regions[n] = &pb.SystemSharedMemoryStatusResponse_RegionStatus{Name: n, Key: r.key, Offset: r.offset, ByteSize: r.size}
		}
	}
	if q.GetName() != "" && len(out.Regions) == 0 {
		return nil, status.Errorf(codes.NotFound, "dloip: no shared-memory region %q", q.GetName())
	}
	return out, nil
}

// acquireRegion takes a reference to the caller's region name for a
// tensor or a write.
func (s *Server) acquireRegion(ctx context.Context, field, name string) (*region, error) {
	if err := s.srv.Allowed(ctx, dlgrpc.OpSharedMemory, name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.regions[name]
	if r == nil || r.principal != dlgrpc.Principal(ctx) {
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
func (s *Server) regionTensor(ctx context.Context, w wireTensor, name string, off, n uint64) (*Tensor, error) {
	field := fmt.Sprintf("input %q", w.name)
	r, err := s.acquireRegion(ctx, field, name)
	if err != nil {
		return nil, err
	}
	b, err := r.span(field, off, n)
	if err != nil {
		r.drop()
		return nil, err
	}
	t, err := rawTensor("input", w, b, true, r.drop)
	if err != nil {
		r.drop()
		return nil, err
	}
	t.params = paramsOf(w.params)
	return t, nil
}

// writeRegion writes an output's bytes into the region its requested
// output names, if it names one (ok false otherwise): one copy, from the
// model's output into the client's memory. The region's byte size must
// hold the output.
func (s *Server) writeRegion(ctx context.Context, name string, params map[string]*pb.InferParameter, data []byte) (ok bool, err error) {
	field := fmt.Sprintf("output %q", name)
	rname, off, n, ok, err := shmParams(field, params)
	if !ok || err != nil {
		return false, err
	}
	if uint64(len(data)) > n {
		return false, status.Errorf(codes.InvalidArgument, "dloip: %s: %s = %d, but the output has %d bytes", field, ParamByteSize, n, len(data))
	}
	r, err := s.acquireRegion(ctx, field, rname)
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
