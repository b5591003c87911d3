package dlgrpc

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

// Hold keeps the memory that messages handed to gRPC share with their
// tensors: it counts its maker's reference and one per buffer gRPC
// holds, and the last drop runs its release, once. A message's large
// tensor bytes go to gRPC without a copy (Writer.Tensor), each buffer
// holding a reference that gRPC drops when it frees the buffer, after
// writing it out; should gRPC lose a buffer without freeing it (a
// connection that fails while the bytes are queued), a cleanup drops the
// reference once the buffer is unreachable, so release still runs once
// and never while gRPC may read the memory.
type Hold struct {
	refs    atomic.Int64
	release func()
	logger  *slog.Logger
	mu      sync.Mutex
	n       int           // buffers gRPC holds
	idle    chan struct{} // closed when n falls to 0
	// progress counts the messages sent and the buffers gRPC freed
	// (Server.WatchStall).
	progress atomic.Int64
	// all, when set, counts the buffers gRPC holds over every call of
	// a server (Server.Held).
	all *atomic.Int64
	// parent, when set, counts h's buffers and progress too (Within).
	parent *Hold
	// sending counts the sends under way (Sending).
	sending atomic.Int64
	// onlyBusy: the watch of h counts only busy time (WatchSends).
	onlyBusy bool
}

// NewHold makes a Hold with one reference, its maker's, whose last drop
// runs release. A panic in release is recovered and reported to logger
// (slog.Default() when nil): release may run on gRPC's writer goroutine
// or a cleanup's, where a panic would end the process.
func NewHold(release func(), logger *slog.Logger) *Hold {
	h := &Hold{release: release, logger: logger}
	h.refs.Store(1)
	return h
}

// Drop drops a reference: the maker's, once, when it is done.
func (h *Hold) Drop() {
	if h.refs.Add(-1) == 0 && h.release != nil {
		_ = SafeCall(h.logger, "a release callback", func() error { h.release(); return nil })
	}
}

// Sent counts a message handed to gRPC, as progress.
func (h *Hold) Sent() { h.progress.Add(1) }

// Within makes parent count h's buffers and progress too (its Pending,
// Progress, Wait and idleness), not its references: a stream that sends
// each message with a Hold of its own (the memory of that message's
// tensors) is watched as one (Server.WatchSends). Call it before a
// message of h is marshalled.
func (h *Hold) Within(parent *Hold) { h.parent = parent }

// Sending marks a send under way on h's call, until the returned
// function is called: a message being handed to gRPC, which blocks
// while the peer does not read. Server.WatchSends counts a call's time
// without progress only while a send is under way or gRPC holds its
// buffers. The end of a send counts as progress.
func (h *Hold) Sending() (done func()) {
	h.sending.Add(1)
	return func() {
		h.sending.Add(-1)
		h.progress.Add(1)
	}
}

// busy reports whether a send is under way or gRPC holds a buffer.
func (h *Hold) busy() bool { return h.sending.Load() > 0 || h.Pending() > 0 }

// Progress is the count of messages sent and buffers freed so far.
func (h *Hold) Progress() int64 { return h.progress.Load() }

// Pending is how many buffers gRPC still holds.
func (h *Hold) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Wait returns once gRPC has freed every buffer it holds, or ctx ends.
func (h *Hold) Wait(ctx context.Context) {
	h.mu.Lock()
	n, idle := h.n, h.idle
	h.mu.Unlock()
	if n == 0 {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// idleChan is closed once gRPC holds no buffer (nil when it holds none).
func (h *Hold) idleChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return nil
	}
	return h.idle
}

func (h *Hold) add() {
	h.refs.Add(1)
	if h.all != nil {
		h.all.Add(1)
	}
	h.count(1)
	if h.parent != nil {
		h.parent.count(1)
	}
}

func (h *Hold) done() {
	if h.all != nil {
		h.all.Add(-1)
	}
	h.count(-1)
	if h.parent != nil {
		h.parent.count(-1)
	}
	h.Drop()
}

// count adds d to the buffers gRPC holds (a buffer freed is progress).
func (h *Hold) count(d int) {
	if d < 0 {
		h.progress.Add(1)
	}
	h.mu.Lock()
	if d > 0 && h.n == 0 {
		h.idle = make(chan struct{})
	}
	if h.n += d; h.n == 0 {
		close(h.idle)
	}
	h.mu.Unlock()
}

// keepBuffer makes a gRPC buffer of p (memory h keeps) without copying
// it: h gains a reference that gRPC drops when it frees the buffer.
func keepBuffer(p []byte, h *Hold) mem.Buffer {
	h.add()
	id := keptIDs.Add(1)
	keptHolds.Store(id, h)
	data := &p
	runtime.AddCleanup(data, dropKept, id)
	return mem.NewBuffer(data, kept(id))
}

// The references of keepBuffers, by number. The buffer's pool (kept)
// and its cleanup know its reference by its number only: were the
// cleanup's argument the Hold, the cleanup could reach the buffer
// through it (its release, and whatever that keeps: a service, its
// gRPC connections, their queued buffers), and a buffer gRPC lost would
// never be collected.
var (
	keptIDs   atomic.Uint64
	keptHolds sync.Map // id -> *Hold
)

// dropKept drops the reference of keepBuffer id, the first time only.
func dropKept(id uint64) {
	if h, ok := keptHolds.LoadAndDelete(id); ok {
		h.(*Hold).done()
	}
}

// kept is the mem.BufferPool of one keepBuffer: putting it back drops
// the reference, once.
type kept uint64

func (kept) Get(int) *[]byte { panic("dlgrpc: kept.Get") }

func (k kept) Put(*[]byte) { dropKept(uint64(k)) }

// Once drops a Hold's reference exactly once: by Drop, or by a cleanup
// should its owner (a response gRPC never marshalled) become unreachable
// first. A server's handler cannot drop the reference of its response
// itself: gRPC marshals the response after the handler returns.
type Once struct {
	h    *Hold
	done atomic.Bool
}

// DropOnce returns a Once for h's maker's reference, dropped at the
// latest when owner is unreachable.
func DropOnce[T any](h *Hold, owner *T) *Once {
	o := &Once{h: h}
	runtime.AddCleanup(owner, func(o *Once) { o.Drop() }, o)
	return o
}

// Drop drops the reference, the first time only.
func (o *Once) Drop() {
	if o != nil && o.done.CompareAndSwap(false, true) {
		o.h.Drop()
	}
}
