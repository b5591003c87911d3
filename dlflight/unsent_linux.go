package dlflight

import (
	"net"
	"syscall"
	"unsafe"
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
	var v int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCOUTQ), uintptr(unsafe.Pointer(&v)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int64(v), true
}
