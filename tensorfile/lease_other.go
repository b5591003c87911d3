//go:build !linux

package tensorfile

// lease is not implemented outside Linux.
type lease struct{}

// Lease needs Linux file leases (fcntl F_SETLEASE); elsewhere it fails
// with ErrUnsupported.
func (f *File) Lease() (<-chan struct{}, error) {
	return nil, fieldErr(ErrUnsupported, "file", f.path, "file leases need Linux")
}

func (f *File) endLease() {}
