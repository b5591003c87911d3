package tensorfile

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/godlpack/dlpack"
	"golang.org/x/sys/unix"
)

// lease is a File's read lease: the descriptor holding it and the channel
// closed when it breaks.
type lease struct {
	fd     *os.File
	raw    int
	broken chan struct{}
}

// Lease takes a read lease on the File's file (Linux: fcntl F_SETLEASE,
// F_RDLCK) and returns a channel that is closed when the lease breaks:
// when another process opens the file for writing or truncates it (and,
// so that no waiter is left behind, when the File is closed). That
// process's open (or truncate(2)) then waits until the File is closed
// (which releases the lease) or until the kernel's lease-break-time passes
// (/proc/sys/fs/lease-break-time, 45 s by default), whichever comes first:
// time for a long-running owner to stop using the tensors, Close, and open
// the file again once it has been rewritten. An open with O_NONBLOCK (as
// coreutils truncate does) fails at once with EAGAIN instead, the lease
// broken all the same. Renaming a new file over the
// old one does not break the lease and needs none: the mapping keeps the
// old file.
//
// The lease is held until Close. Calling Lease again returns the same
// channel. The kernel notifies the holder with SIGIO; Lease asks os/signal
// for SIGIO (signal.Notify) and, at each one, checks its leases with
// F_GETLEASE, so a program that uses SIGIO itself still gets its own.
//
// It fails with an error wrapping ErrLease when the kernel refuses: the
// File was opened ReadWrite (a read lease needs the file open for reading
// only, by everyone), another process has it open for writing (EAGAIN),
// the process neither owns the file nor has CAP_LEASE (EACCES), or the
// filesystem does not support leases or they are disabled
// (/proc/sys/fs/leases-enable; EINVAL; network filesystems, some FUSE and
// overlay setups); with dlpack.ErrClosed after Close; and when the path
// now names another file than the one mapped. tmpfs and ext4 support them.
func (f *File) Lease() (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fieldErr(dlpack.ErrClosed, "file", f.path, "")
	}
	if f.lease != nil {
		return f.lease.broken, nil
	}
	if f.m == nil {
		return nil, fieldErr(ErrLease, "file", f.path, "nothing of it is mapped (ReadNPY reads it into memory)")
	}
	if f.writable {
		return nil, fieldErr(ErrLease, "file", f.path, "opened ReadWrite: a read lease needs the file open for reading only")
	}
	fd, err := os.Open(f.path)
	if err != nil {
		return nil, fieldErr(ErrLease, "file", f.path, err.Error())
	}
	st, err := fd.Stat()
	if err == nil && !os.SameFile(st, f.info) {
		err = errors.New("the path now names another file than the one mapped")
	}
	if err != nil {
		fd.Close()
		return nil, fieldErr(ErrLease, "file", f.path, err.Error())
	}
	raw := int(fd.Fd())
	if _, err := unix.FcntlInt(uintptr(raw), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		fd.Close()
		return nil, fieldErr(ErrLease, "file", f.path, leaseWhy(err))
	}
	l := &lease{fd: fd, raw: raw, broken: make(chan struct{})}
	watchLease(l)
	f.lease = l
	return l.broken, nil
}

func leaseWhy(err error) string {
	switch {
	case errors.Is(err, unix.EAGAIN):
		return "F_SETLEASE: the file is open for writing (EAGAIN)"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return "F_SETLEASE: not the file's owner and no CAP_LEASE (" + err.Error() + ")"
	case errors.Is(err, unix.EINVAL):
		return "F_SETLEASE: the filesystem does not support leases, or they are disabled (/proc/sys/fs/leases-enable) (EINVAL)"
	}
	return "F_SETLEASE: " + err.Error()
}

// endLease releases the lease, if any (f.mu held).
func (f *File) endLease() {
	if f.lease == nil {
		return
	}
	unwatchLease(f.lease)
	f.lease.fd.Close() // closing the descriptor releases the lease
}

// leases are the leases held, checked at each SIGIO.
var leases struct {
	sync.Mutex
	held    map[*lease]struct{}
	started bool
}

func watchLease(l *lease) {
	leases.Lock()
	defer leases.Unlock()
	if leases.held == nil {
		leases.held = make(map[*lease]struct{})
	}
	leases.held[l] = struct{}{}
	if !leases.started {
		leases.started = true
		sig := make(chan os.Signal, 16)
		signal.Notify(sig, syscall.SIGIO)
		go checkLeases(sig)
	}
}

func unwatchLease(l *lease) {
	leases.Lock()
	defer leases.Unlock()
	if _, ok := leases.held[l]; ok {
		delete(leases.held, l)
		close(l.broken)
	}
}

// checkLeases closes the channel of each lease being broken: F_GETLEASE
// then reports the type the lease is being downgraded to, F_UNLCK.
// (SIGIO carries no file descriptor without F_SETSIG and a real-time
// signal, which os/signal cannot read; signals may also merge.) A lease
// whose channel is closed is not watched any more; it is still held until
// Close.
func checkLeases(sig chan os.Signal) {
	for range sig {
		leases.Lock()
		for l := range leases.held {
			t, err := unix.FcntlInt(uintptr(l.raw), unix.F_GETLEASE, 0)
			if err != nil || t != unix.F_RDLCK {
				delete(leases.held, l)
				close(l.broken)
			}
		}
		leases.Unlock()
	}
}
