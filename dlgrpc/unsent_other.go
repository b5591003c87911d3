//go:build !linux

package dlgrpc

import (
	"net"
	"sync/atomic"
	"syscall"
)

// unsent is not known here: progress is what Write hands to the socket.
func unsent(net.Conn) (int64, bool) { return 0, false }

// rawConn is nil: Write cuts what it writes into chunks instead.
func rawConn(net.Conn) syscall.RawConn { return nil }

func writeRaw(syscall.RawConn, []byte, *atomic.Int64) (int, error) {
	panic("dlgrpc: writeRaw without a raw connection")
}
