//go:build !linux

package dlgrpc

import (
	"net"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/mem"
)

// rawConn is nil here: trackedConn.Write cuts what it writes into
// chunks instead, and gRPC reads through its own buffered reader.
func rawConn(net.Conn) syscall.RawConn { return nil }

func writeRaw(syscall.RawConn, []byte, *atomic.Int64) (int, error) {
	panic("dlgrpc: writeRaw without a raw connection")
}

type rawReader struct{}

func newRawReader(net.Conn) *rawReader { return nil }

func (*rawReader) readOnReady(int, mem.BufferPool) (*[]byte, int, error) {
	panic("dlgrpc: readOnReady without a raw connection")
}
