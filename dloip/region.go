package dloip

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/godlpack/dlpack"
	"golang.org/x/sys/unix"
)

// Region is a POSIX shared-memory object this process created and
// mapped, to hand tensors to a model server on the same host by
// reference (Triton's system shared memory; a dloip Server takes it
// too): create it, put tensors in it, register it with a Client, and
// every Input whose tensor lies in it goes as its region, offset and
// byte size, with none of its bytes on the wire. An output asked for in
// it is written there by the server (RequestedOutput.Region and Memory).
//
// The object is /dev/shm/Key, created for this process's user alone
// (mode 0600): a dloip Server takes only objects of its own user that no
// one else may write, so the server must run as the same user. The
// mapping lives until Close and until every tensor of it (Tensor,
// exports made from one) is released, whichever is last; Close also
// removes the object.
type Region struct {
	key  string
	data []byte
	refs atomic.Int64 // Close's and one per tensor alive
	once sync.Once
}

// CreateRegion creates the shared-memory object key (a name, without
// "/"; it must not exist) of size bytes and maps it read and write.
func CreateRegion(key string, size int64) (*Region, error) {
	k := strings.TrimPrefix(key, "/")
	if k == "" || strings.ContainsAny(k, "/\x00") || k == "." || k == ".." {
		return nil, &dlpack.FieldError{Field: "key", Value: fmt.Sprintf("%q", key), Err: ErrInvalid, Why: "the name of a shared-memory object: one name, no \"/\""}
	}
	if size <= 0 || size > 1<<46 {
		return nil, &dlpack.FieldError{Field: "size", Value: size, Err: ErrInvalid, Why: "1 byte to 64 TiB"}
	}
	path := shmDir + "/" + k
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dloip: create region %q: %w", key, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("dloip: create region %q: size %d: %w", key, size, err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("dloip: create region %q: map: %w", key, err)
	}
	r := &Region{key: k, data: data}
	r.refs.Store(1)
	return r, nil
}

// Key is the object's name, as RegisterSystemSharedMemory takes it.
func (r *Region) Key() string { return r.key }

// Size is the region's size in bytes.
func (r *Region) Size() int64 { return int64(len(r.data)) }

// Bytes is the mapping, to read and write (valid until Close and the
// release of every tensor of it).
func (r *Region) Bytes() []byte { return r.data }

// Close removes the object and drops the region's reference to the
// mapping, which is unmapped once no tensor of it is alive. Unregister
// it from the servers first: an Infer that names it afterwards fails
// there. Calling Close again does nothing.
func (r *Region) Close() error {
	var err error
	r.once.Do(func() {
		err = os.Remove(shmDir + "/" + r.key)
		r.ReleaseTensor()
	})
	return err
}

// ReleaseTensor implements dlpack.Releaser: a tensor's reference to the
// mapping ends.
func (r *Region) ReleaseTensor() {
	if r.refs.Add(-1) == 0 {
		_ = unix.Munmap(r.data)
	}
}

// hold takes a reference to the mapping: false once it is gone.
func (r *Region) hold() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// contains reports where b lies in the mapping: its offset, and whether
// it lies in it whole.
func (r *Region) contains(b []byte) (int64, bool) {
	if len(b) == 0 || len(r.data) == 0 {
		return 0, false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(r.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < lo || p+uintptr(len(b)) > lo+uintptr(len(r.data)) {
		return 0, false
	}
	return int64(p - lo), true
}

// Tensor is a tensor of dt and shape, compact row-major, offset bytes
// into the region: a view of the mapping (no copy), a dlpack.Producer
// that holds the mapping while it and its exports live. Written through
// Bytes (or a writable export), it is what an Input sends by reference.
// The offset must keep the elements aligned for dt.
func (r *Region) Tensor(offset int64, dt dlpack.DataType, shape []int64) (dlpack.Producer, error) {
	n, err := byteSize(dt, shape)
	if err != nil {
		return nil, err
	}
	if offset < 0 || offset > r.Size() || n > r.Size()-offset {
		return nil, &dlpack.FieldError{Field: "offset", Value: offset, Err: ErrInvalid,
			Why: fmt.Sprintf("%v %v needs %d bytes, and the region has %d from %d", dt, shape, n, r.Size()-min(offset, r.Size()), offset)}
	}
	if a := int64(dt.ItemSize()); a > 1 && offset%a != 0 {
		return nil, &dlpack.FieldError{Field: "offset", Value: offset, Err: dlpack.ErrAlignment, Why: fmt.Sprintf("%v needs %d-byte alignment", dt, a)}
	}
	return &regionTensor{r: r, off: offset, n: n, dt: dt, shape: append([]int64{}, shape...)}, nil
}

// regionTensor is a tensor in a Region.
type regionTensor struct {
	r     *Region
	off   int64
	n     int64
	dt    dlpack.DataType
	shape []int64
}

// DescribeTensor implements dlpack.Source.
func (t *regionTensor) DescribeTensor(d *dlpack.Description) error {
	if !t.r.hold() {
		return dlpack.ErrClosed
	}
	*d = dlpack.Description{DType: t.dt, Shape: t.shape, Size: uintptr(t.n), Owner: t.r}
	if t.n > 0 {
		d.Data = unsafe.Pointer(&t.r.data[t.off])
	}
	return nil
}

// DLPackDevice implements dlpack.Producer: the CPU.
func (t *regionTensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

// DLPack implements dlpack.Producer.
func (t *regionTensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(t, req)
}

// RegisterRegion registers r with the server as the region name
// (RegisterSystemSharedMemory of its key, whole), and remembers it: from
// then on every Input whose tensor lies in r whole goes by reference,
// its region, offset and byte size, none of its bytes on the wire.
func (c *Client) RegisterRegion(ctx context.Context, name string, r *Region) error {
	if err := c.RegisterSystemSharedMemory(ctx, name, r.key, 0, uint64(r.Size())); err != nil {
		return err
	}
	c.regionsMu.Lock()
	defer c.regionsMu.Unlock()
	if c.regions == nil {
		c.regions = map[string]*Region{}
	}
	c.regions[name] = r
	return nil
}

// UnregisterRegion unregisters the region name with the server and
// forgets it.
func (c *Client) UnregisterRegion(ctx context.Context, name string) error {
	c.regionsMu.Lock()
	delete(c.regions, name)
	c.regionsMu.Unlock()
	return c.UnregisterSystemSharedMemory(ctx, name)
}

// regionOf finds the registered region b lies in whole: its name and
// b's offset there.
func (c *Client) regionOf(b []byte) (string, int64, bool) {
	c.regionsMu.RLock()
	defer c.regionsMu.RUnlock()
	for name, r := range c.regions {
		if off, ok := r.contains(b); ok {
			return name, off, true
		}
	}
	return "", 0, false
}

// Mapped reports that the tensor lies in a file mapping: sent by value
// (its region not registered), its bytes are copied under a fault guard.
func (t *regionTensor) Mapped() bool { return true }
