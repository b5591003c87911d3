package dlgrpc

// Transport sizes gRPC's HTTP/2 transport for tensors. gRPC's defaults
// (64 KiB flow-control windows grown by its bandwidth estimate, 32 KiB
// socket buffers) are made for small messages; a tensor is a few large
// ones. The zero Transport takes the defaults below.
type Transport struct {
	// WindowBytes is the HTTP/2 flow-control window of each stream: how
	// many bytes a sender may have in flight on one call before the
	// receiver reads them (DefaultWindowBytes when zero). The windows are
	// static: both sides set them with gRPC's StaticStreamWindowSize and
	// StaticConnWindowSize options, which turn off gRPC's bandwidth
	// estimate (it starts at 64 KiB and grows); from gRPC 1.85 plain
	// InitialWindowSize is meant to leave that estimate on. It is capped
	// at the message limit and raised to gRPC's minimum of 64 KiB. A link
	// whose bandwidth times round trip exceeds it needs a larger one; on
	// loopback, windows from 256 KiB to 16 MiB measured the same.
	WindowBytes int
	// ConnWindowBytes is the window of the whole connection, which its
	// streams share (DefaultConnWindowBytes when zero; at least
	// WindowBytes). Neither window lets a peer bypass the message and
	// tensor limits: they bound what is buffered, not what is accepted.
	ConnWindowBytes int
	// ReadBufferBytes and WriteBufferBytes size the buffers between the
	// socket and gRPC's framer (DefaultIOBufferBytes when zero; negative:
	// no buffer, a system call per frame).
	ReadBufferBytes, WriteBufferBytes int
}

// Transport defaults.
const (
	DefaultWindowBytes     = 16 << 20
	DefaultConnWindowBytes = 16 << 20
	DefaultIOBufferBytes   = 1 << 20
)

// minWindow is gRPC's smallest window; below it gRPC ignores the setting.
const minWindow = 64 << 10

// sizes resolves t for a side whose message limit is maxMessage.
func (t Transport) sizes(maxMessage int) (window, conn int32, read, write int) {
	w, cw := t.WindowBytes, t.ConnWindowBytes
	if w <= 0 {
		w = DefaultWindowBytes
	}
	if cw <= 0 {
		cw = DefaultConnWindowBytes
	}
	w = max(min(w, maxMessage, 1<<30), minWindow)
	cw = max(min(cw, 1<<30), w)
	io := func(n int) int {
		switch {
		case n == 0:
			return DefaultIOBufferBytes
		case n < 0:
			return 0
		}
		return n
	}
	return int32(w), int32(cw), io(t.ReadBufferBytes), io(t.WriteBufferBytes)
}
