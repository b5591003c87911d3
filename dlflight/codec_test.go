package dlflight

import (
	"bytes"
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// TestMarshalShares: a frame whose memory is held is marshalled with its
// large body part shared, not copied (the buffer gRPC writes from is the
// tensor's memory), holding a reference that gRPC's free drops; the bytes
// are the same as the copied form's.
func TestMarshalShares(t *testing.T) {
	values := make([]byte, 1<<20)
	for i := range values {
		values[i] = byte(i * 7)
	}
	pad := make([]byte, 24)
	released := 0
	e := &entry{release: func() { released++ }}
	e.refs.Store(1)
	f := &outFrame{
		desc:   &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"x"}},
		header: []byte("header"),
		body:   [][]byte{values, pad},
	}
	c := newCodec()
	copied, err := c.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := copied.Materialize()
	copied.Free()
	if e.refs.Load() != 1 {
		t.Fatalf("the copied form took a reference: %d", e.refs.Load())
	}

	sd := newSending(e)
	f.keep = sd
	shared, err := c.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := shared.Materialize(); !bytes.Equal(got, want) {
		t.Fatalf("shared form: %d bytes, differ from the copied form's %d", len(got), len(want))
	}
	found := 0
	for _, b := range shared {
		if d := b.ReadOnlyData(); len(d) > 0 && unsafe.SliceData(d) == unsafe.SliceData(values) {
			found++
			if len(d) != len(values) {
				t.Fatalf("shared part of %d bytes, want %d", len(d), len(values))
			}
		}
	}
	if found != 1 || len(shared) != 3 {
		t.Fatalf("%d buffers, %d of them the values themselves", len(shared), found)
	}
	if e.refs.Load() != 2 {
		t.Fatalf("references while gRPC holds the values: %d, want 2", e.refs.Load())
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	sd.wait(gone) // gRPC still holds the values: returns only because the call ended
	shared.Free()
	sd.wait(context.Background()) // returns: gRPC let go of them
	if e.refs.Load() != 1 || released != 0 {
		t.Fatalf("after gRPC's free: %d references, released %d", e.refs.Load(), released)
	}
	e.drop()
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
}

// TestMarshalLost: should gRPC drop a shared buffer without freeing it
// (a connection that fails with the bytes queued), the reference it held
// is dropped once the buffer is unreachable.
func TestMarshalLost(t *testing.T) {
	var released atomic.Int32
	e := &entry{release: func() { released.Add(1) }}
	e.refs.Store(1)
	func() {
		b, err := newCodec().Marshal(&outFrame{header: []byte("h"), body: [][]byte{make([]byte, 1<<20)}, keep: newSending(e)})
		if err != nil || len(b) != 2 {
			t.Fatalf("%d buffers, %v", len(b), err)
		}
	}()
	e.drop()
	waitFor(t, "the lost buffer's reference", func() bool {
		runtime.GC()
		return released.Load() == 1
	})
	if e.refs.Load() != 0 {
		t.Fatalf("references: %d", e.refs.Load())
	}
}
