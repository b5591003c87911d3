package dlgrpctest

import "testing"

// The heap bounds the services' hostile tests hold the process to, over
// HostileRounds hostile messages: no one message makes it allocate more
// than PerMessage (a hostile message declares up to terabytes; its own
// bytes are under 1 KiB), the heap never holds more than PeakHeap of
// live and garbage objects together, and what is live after all of them
// is within Kept of what was before.
const (
	HostileRounds = 10000
	PerMessage    = 4 << 20
	PeakHeap      = 64 << 20
	Kept          = 8 << 20
)

// HeapRun sends HostileRounds hostile messages with send (i is the
// round) and fails t unless the bounds above hold. Under the race
// detector sync.Pool drops a quarter of what is put back, and gRPC's
// transport takes its write buffer (1 MiB) from a pool for every write:
// a message then seems to allocate a write buffer per frame written,
// which is the detector's, not the message's. The bound per message is
// left out there; the peak and what is kept are checked.
func HeapRun(t testing.TB, send func(i int) error) {
	t.Helper()
	var h Heap
	before := h.Live()
	var most, peak uint64
	for i := range HostileRounds {
		a := h.Allocated()
		if err := send(i); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		most = max(most, h.Allocated()-a)
		peak = max(peak, h.Objects())
	}
	after := h.Live()
	t.Logf("%d hostile messages: at most %d KiB allocated for one, heap peak %.1f MiB, live %.1f MiB before and %.1f MiB after",
		HostileRounds, most>>10, float64(peak)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
	if most > PerMessage && !RaceDetector || peak > PeakHeap || after > before+Kept {
		t.Fatalf("bounds: %d bytes for one message (at most %d), peak %d (at most %d), %d kept (at most %d)",
			most, PerMessage, peak, PeakHeap, int64(after)-int64(before), Kept)
	}
}
