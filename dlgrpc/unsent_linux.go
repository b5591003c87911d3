package dlgrpc

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// unsent is how many bytes c's socket holds that the peer has not yet
// taken (SIOCOUTQ, which Linux calls TIOCOUTQ for sockets too); ok false
// when c is not a socket this can ask.
func unsent(c net.Conn) (n int64, ok bool) {
	sc, isSC := c.(syscall.Conn)
	if !isSC {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var v int
	var ioErr error
	if err := raw.Control(func(fd uintptr) { v, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCOUTQ) }); err != nil || ioErr != nil {
		return 0, false
	}
	return int64(v), true
}

// rawConn is c's socket, for writeRaw; nil when c is not one.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// writeRaw writes all of p to raw as net.Conn's Write does (waiting on
// the poller, honouring the write deadline), adding each part the
// kernel takes to written as it goes.
func writeRaw(raw syscall.RawConn, p []byte, written *atomic.Int64) (int, error) {
	n := 0
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, err := unix.Write(int(fd), p[n:])
			if m > 0 {
				n += m
				written.Add(int64(m))
			}
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false // wait until the socket takes more
			case err != nil:
				werr = os.NewSyscallError("write", err)
				return true
			case m == 0:
				werr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return n, err
}
