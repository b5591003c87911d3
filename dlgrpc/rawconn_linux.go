package dlgrpc

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/mem"
)

// rawConn is c's socket when c is a bare TCP or Unix connection, whose
// bytes are the socket's; nil for anything else (a TLS connection, or a
// wrapper that may change the bytes even if it offers its socket).
func rawConn(c net.Conn) syscall.RawConn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// writeRaw writes all of p to raw as net.Conn's Write does (waiting on
// the poller, honouring the write deadline), adding each part the
// kernel takes to written as it goes. It calls the syscall package, as
// net does, so that the race detector sees the socket's writes and reads
// as one.
func writeRaw(raw syscall.RawConn, p []byte, written *atomic.Int64) (int, error) {
	n := 0
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, err := syscall.Write(int(fd), p[n:])
			if m > 0 {
				n += m
				written.Add(int64(m))
			}
			switch {
			case err == syscall.EINTR:
			case err == syscall.EAGAIN:
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

// rawReader reads a socket only once it is readable, taking the buffer
// from gRPC's pool then: what gRPC's transport does with a bare
// *net.TCPConn, and what it asks of a connection through ReadOnReady.
// A connection of ours that wraps the socket offers it too, or gRPC
// reads it through a buffered reader of its own instead (one copy more:
// 5% of a 1 MiB call on loopback). One goroutine reads a connection;
// the fields carry one read's arguments and results into the callback
// without allocating.
type rawReader struct {
	raw  syscall.RawConn
	read func(fd uintptr) bool
	// reads counts the reads gRPC made through it (a test's proof that
	// gRPC still asks for ReadOnReady)
	reads atomic.Int64
	size  int
	pool  mem.BufferPool
	buf   *[]byte
	n     int
	err   error
}

func newRawReader(c net.Conn) *rawReader {
	raw := rawConn(c)
	if raw == nil {
		return nil
	}
	r := &rawReader{raw: raw}
	r.read = r.readFD
	if rawReaderMade != nil {
		rawReaderMade(r)
	}
	return r
}

// rawReaderMade, when set (by a test), sees every rawReader made.
var rawReaderMade func(*rawReader)

func (r *rawReader) readFD(fd uintptr) bool {
	r.buf = r.pool.Get(r.size)
	for {
		r.n, r.err = syscall.Read(int(fd), *r.buf)
		if r.err != syscall.EINTR {
			break
		}
	}
	if r.err != nil {
		r.pool.Put(r.buf)
		r.buf = nil
		return r.err != syscall.EAGAIN // wait until readable
	}
	return true
}

// readOnReady is ReadOnReady: a buffer of size bytes from pool holding n
// bytes read, or an error (io.EOF when the peer closed).
func (r *rawReader) readOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	r.size, r.pool = size, pool
	r.reads.Add(1)
	err := r.raw.Read(r.read)
	buf, n, rerr := r.buf, r.n, r.err
	r.pool, r.buf, r.err = nil, nil, nil
	switch {
	case err != nil:
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		return nil, 0, os.NewSyscallError("read", rerr)
	case n <= 0:
		pool.Put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}
