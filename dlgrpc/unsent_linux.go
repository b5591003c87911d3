package dlgrpc

import (
	"net"
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
