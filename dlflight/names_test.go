package dlflight

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
)

// Names are any UTF-8 text: empty, with NUL, slashes or 64 KiB long, they
// are listed, described and fetched as registered. A name that is not
// UTF-8 cannot be a Flight descriptor path (a protobuf string): Register
// refuses it with ErrName before taking the producer, and a DoPut under a
// command descriptor of such bytes gets InvalidArgument and is not held.
// Before, one such name made every ListFlights fail (Internal: the
// FlightInfo could not be marshalled).
func TestNames(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: alloc})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	names := []string{"", "a/b", "nul\x00", "é€😀", strings.Repeat("n", 64<<10)}
	srcs := map[string]*rawTensor{}
	for _, n := range names {
		srcs[n] = newRaw(t, dlpack.Int16, 2, 3)
		if err := s.Register(n, srcs[n]); err != nil {
			t.Fatalf("Register(%.20q): %v", n, err)
		}
	}

	bad := newRaw(t, dlpack.Int8, 2)
	if err := s.Register("\xff\xfe", bad); !errors.Is(err, ErrName) {
		t.Fatalf("Register of a name that is not UTF-8: %v, want ErrName", err)
	}
	if bad.exports.Load() != 0 {
		t.Fatal("the producer of a refused name was taken")
	}
	stream, err := c.fc.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := hold(newRaw(t, dlpack.Int8, 2))
	if err != nil {
		t.Fatal(err)
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("\xff\xfe")}
	_ = send(stream.SendMsg, desc, e.l.wire("x"), e.l, e.data, nil, false, DefaultMaxMessageBytes) // io.EOF once the server answers
	e.drop()
	_ = stream.CloseSend()
	_, err = stream.Recv()
	wantCode(t, err, codes.InvalidArgument)
	if got := s.Names(); len(got) != len(names) {
		t.Fatalf("held %q", got)
	}

	infos, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var listed []string
	for _, i := range infos {
		listed = append(listed, i.Name)
	}
	slices.Sort(listed)
	if want := s.Names(); !slices.Equal(listed, want) {
		t.Fatalf("listed %.40q, want %.40q", listed, want)
	}
	for _, n := range names {
		if i, err := c.Info(ctx, n); err != nil || i.Name != n {
			t.Fatalf("Info(%.20q): %v %.20q", n, err, i.Name)
		}
		got, err := c.Get(ctx, n)
		if err != nil {
			t.Fatalf("Get(%.20q): %v", n, err)
		}
		sameTensor(t, got, srcs[n])
		got.Close()
	}
	s.Shutdown()
	alloc.AssertSize(t, 0)
}
