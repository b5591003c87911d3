package dlflight

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
	"github.com/godlpack/dlpack/internal/arrowfb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const (
	methodDoGet         = "/arrow.flight.protocol.FlightService/DoGet"
	methodDoPut         = "/arrow.flight.protocol.FlightService/DoPut"
	methodGetFlightInfo = "/arrow.flight.protocol.FlightService/GetFlightInfo"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func marshal(fds ...*flight.FlightData) [][]byte {
	out := make([][]byte, len(fds))
	for i, fd := range fds {
		out[i], _ = proto.Marshal(fd)
	}
	return out
}

// hostilePut is a DoPut stream, as bytes on the wire, that lies to a
// server: with the status it must get and words its message must have.
type hostilePut struct {
	name  string
	msgs  [][]byte
	code  codes.Code
	parts []string
}

// hostilePuts are the streams of hostile clients.
func hostilePuts(t testing.TB) []hostilePut {
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"p"}}
	with := func(fds []*flight.FlightData) []*flight.FlightData {
		fds[0].FlightDescriptor = desc
		return fds
	}
	// a schema that declares 2^40 rows of 4 floats (16 TiB) and one row
	// of 4 floats
	huge := with(encode(t, fslRecord(4, floats(4), ext("[4]"), map[string]string{MetaShape: "[1099511627776,4]", MetaDType: "float32"})))
	// 2^26 rows of 4 floats, 1 GiB: within the limits, and 1 row sent
	gib := with(encode(t, fslRecord(4, floats(4), ext("[4]"), map[string]string{MetaShape: "[67108864,4]", MetaDType: "float32"})))
	good := with(encode(t, fslRecord(4, floats(8), ext("[4]"), nil)))
	head, _ := proto.Marshal(good[0])
	// a schema whose field claims 4,294,967,295 children: arrow-go's
	// reader makes room for them first (FuzzSchema found it)
	children := with(encode(t, fslRecord(4, floats(8), ext("[4]"), nil)))
	children[0].DataHeader = hugeChildren(t, children[0].DataHeader)
	raw := func(b ...byte) [][]byte { return [][]byte{append(append([]byte{}, head...), b...)} }
	return []hostilePut{
		{"huge shape declared", marshal(huge...), codes.InvalidArgument, []string{"shape"}},
		{"1 GiB declared, 16 bytes sent", marshal(gib...), codes.InvalidArgument, []string{"1 rows arrived", "67108864"}},
		{"schema only, 1 GiB declared", marshal(gib[0]), codes.InvalidArgument, []string{"0 rows arrived"}},
		{"overlong varint", raw(append(protowire.AppendTag(nil, fieldDataBody, protowire.BytesType), dlgrpctest.Overlong...)...), codes.InvalidArgument, []string{"malformed", "varint"}},
		{"tenth varint byte above 1", raw(append(protowire.AppendTag(nil, 99, protowire.VarintType), dlgrpctest.TenthAboveOne...)...), codes.InvalidArgument, []string{"malformed", "varint"}},
		{"length beyond the message", raw(append(protowire.AppendTag(nil, fieldDataBody, protowire.BytesType), protowire.AppendVarint(nil, 1<<30)...)...), codes.InvalidArgument, []string{"malformed", "1073741824 bytes"}},
		{"a field of 2^32-1 children", marshal(children...), codes.InvalidArgument, []string{"data_header"}},
		{"a compressed batch", marshal(with(encodeWith(t, fslRecord(4, floats(8), ext("[4]"), nil), ipc.WithZstd()))...), codes.InvalidArgument, []string{"compress"}},
		{"no descriptor", marshal(encode(t, fslRecord(4, floats(8), ext("[4]"), nil))...), codes.InvalidArgument, []string{"descriptor"}},
		{"garbage header", marshal(&flight.FlightData{FlightDescriptor: desc, DataHeader: []byte("not a flatbuffer at all")}), codes.InvalidArgument, []string{"invalid tensor stream"}},
	}
}

// A server with the zero Options gives every hostile DoPut a clear
// status and serves on; nothing of a declared size is allocated, and
// nothing received stays held.
func TestHostilePutsZeroOptions(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: alloc})
	conn := dlgrpctest.Dial(t, addr)
	good := marshal(encode(t, fslRecord(4, floats(8), ext("[4]"), nil))...)
	first := &flight.FlightData{}
	proto.Unmarshal(good[0], first)
	first.FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"ok"}}
	good[0], _ = proto.Marshal(first)
	for _, tc := range hostilePuts(t) {
		_, err := dlgrpctest.Stream(ctxT(t), conn, methodDoPut, tc.msgs...)
		wantCode(t, err, tc.code)
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %v lacks %q", tc.name, err, p)
			}
		}
		t.Logf("%s: %v", tc.name, err)
		alloc.AssertSize(t, 0)
		if _, err := dlgrpctest.Stream(ctxT(t), conn, methodDoPut, good...); err != nil {
			t.Fatalf("after %s: %v", tc.name, err)
		}
		s.Unregister("ok")
	}
	if names := s.Names(); len(names) != 0 {
		t.Fatalf("held %v", names)
	}
	// tickets and descriptors that lie
	for _, tk := range [][]byte{[]byte(rangeMagic + "{"), []byte(rangeMagic + `{"name":"ok","from":5,"to":2}`), []byte(rangeMagic + `{"name":"ok","from":0,"to":1e300}`), []byte("\xff\xfe")} {
		req, _ := proto.Marshal(&flight.Ticket{Ticket: tk})
		_, err := dlgrpctest.Stream(ctxT(t), conn, methodDoGet, req)
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Fatalf("ticket %q: %v", tk, err)
		}
	}
	for _, d := range []*flight.FlightDescriptor{{Type: flight.DescriptorPATH, Path: []string{"a", "b"}}, {Type: flight.DescriptorCMD, Cmd: []byte("\xff")}, {}} {
		req, _ := proto.Marshal(d)
		_, err := dlgrpctest.Unary(ctxT(t), conn, methodGetFlightInfo, req)
		wantCode(t, err, codes.InvalidArgument)
	}
}

// hostileGets are the answers of a hostile server to GetFlightInfo and
// DoGet, as bytes on the wire: with the error Get must wrap.
type hostileGet struct {
	name string
	info []byte // nil: GetFlightInfo fails with Unimplemented, and Get goes to DoGet
	get  [][]byte
	is   error
}

func hostileGets(t testing.TB) []hostileGet {
	gib := encode(t, fslRecord(4, floats(4), ext("[4]"), map[string]string{MetaShape: "[67108864,4]", MetaDType: "float32"}))
	children := encode(t, fslRecord(4, floats(8), ext("[4]"), nil))
	children[0].DataHeader = hugeChildren(t, children[0].DataHeader)
	head, _ := proto.Marshal(encode(t, fslRecord(4, floats(8), ext("[4]"), nil))[0])
	raw := func(b ...byte) [][]byte { return [][]byte{append(append([]byte{}, head...), b...)} }
	// a flight info of two endpoints that cover the rows of shape
	info := func(shape []int64) []byte {
		i := &flight.FlightInfo{AppMetadata: Info{Name: "x", DType: dlpack.Float32, Shape: shape}.appMetadata()}
		half := shape[0] / 2
		for _, r := range [][2]int64{{0, half}, {half, shape[0]}} {
			md, _ := json.Marshal(rangeJSON{From: r[0], To: r[1]})
			i.Endpoint = append(i.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: []byte("x")}, AppMetadata: md})
		}
		b, _ := proto.Marshal(i)
		return b
	}
	return []hostileGet{
		{"1 GiB declared, 16 bytes sent", nil, marshal(gib...), ErrInvalid},
		{"schema only, 1 GiB declared", nil, marshal(gib[0]), ErrInvalid},
		{"a field of 2^32-1 children", nil, marshal(children...), ErrInvalid},
		{"a compressed batch", nil, marshal(encodeWith(t, fslRecord(4, floats(8), ext("[4]"), nil), ipc.WithLZ4())...), ErrInvalid},
		{"8 GiB declared in the flight info", info([]int64{1 << 31, 1}), nil, ErrLimit},
		{"an overflowing shape in the flight info", info([]int64{1 << 40, 1 << 40}), nil, ErrInvalid},
		{"overlong varint", nil, raw(append(protowire.AppendTag(nil, fieldDataBody, protowire.BytesType), dlgrpctest.Overlong...)...), dlgrpc.ErrMalformed},
		{"tenth varint byte above 1", nil, raw(append(protowire.AppendTag(nil, 99, protowire.VarintType), dlgrpctest.TenthAboveOne...)...), dlgrpc.ErrMalformed},
		{"length beyond the message", nil, raw(append(protowire.AppendTag(nil, fieldDataBody, protowire.BytesType), protowire.AppendVarint(nil, 1<<30)...)...), dlgrpc.ErrMalformed},
	}
}

// serveHostile runs a hostile Flight server answering with the case
// *next points at.
func serveHostile(t testing.TB, cases []hostileGet, next *atomic.Int32) string {
	return dlgrpctest.Serve(t, func(method string, _ []byte) ([][]byte, error) {
		c := cases[next.Load()]
		switch method {
		case methodGetFlightInfo:
			if c.info == nil {
				return nil, status.Error(codes.Unimplemented, "no flight info here")
			}
			return [][]byte{c.info}, nil
		case methodDoGet:
			return c.get, nil
		}
		return nil, status.Error(codes.Unimplemented, method)
	})
}

// A client with the zero ClientOptions fails every hostile answer with
// an error wrapping the sentinel that says why, and holds nothing.
func TestHostileServerZeroOptions(t *testing.T) {
	cases := hostileGets(t)
	var next atomic.Int32
	addr := serveHostile(t, cases, &next)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c := dial(t, addr, ClientOptions{Allocator: alloc})
	for i, tc := range cases {
		next.Store(int32(i))
		_, err := c.Get(ctxT(t), "x")
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.is)
		}
		alloc.AssertSize(t, 0)
		t.Logf("%s: %v", tc.name, err)
	}
}

// User code never ends the process: an Authenticate or Allow hook that
// panics fails that call alone with codes.Internal, reported to the
// Logger, and the server serves on (a panicking Authenticate ended it,
// every client then refused).
func TestHookPanics(t *testing.T) {
	for _, opts := range []Options{
		{Logger: quiet, Authenticate: func(context.Context, dlgrpc.AuthRequest) (string, error) { panic("Authenticate panics") }},
		{Logger: quiet, Allow: func(string, dlgrpc.Op, string) bool { panic("Allow panics") }},
	} {
		s, addr := serve(t, opts)
		if err := s.Register("x", newRaw(t, dlpack.Int8, 4)); err != nil {
			t.Fatal(err)
		}
		c := dial(t, addr, ClientOptions{})
		for range 3 {
			_, err := c.Get(ctxT(t), "x")
			wantCode(t, err, codes.Internal)
			if !strings.Contains(err.Error(), "panics") {
				t.Fatalf("%v", err)
			}
		}
		t.Logf("%v", status.Convert(func() error { _, err := c.Info(ctxT(t), "x"); return err }()).Message())
	}
}

// A range whose server is alive but silent is fetched from its replica
// once StallTimeout passes with nothing arriving, while the caller's
// deadline still has time; with no replica, Get fails with ErrStalled
// instead of waiting for the deadline.
func TestSilentReplica(t *testing.T) {
	src := newRaw(t, dlpack.Float32, 20, 4)
	good, addrGood := serve(t, Options{})
	if err := good.Register("w", src); err != nil {
		t.Fatal(err)
	}
	// a server that takes DoGet and never answers
	silent := dlgrpctest.Serve(t, func(string, []byte) ([][]byte, error) {
		select {} // alive, and silent for as long as the call lasts
	})
	a, addrA := serve(t, Options{})
	if err := a.RegisterRemote("x", dlpack.Float32, []int64{20, 4}, []RemoteRange{{0, 20, []string{"grpc+tcp://" + silent, "grpc+tcp://" + addrGood}, []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterRemote("y", dlpack.Float32, []int64{20, 4}, []RemoteRange{{0, 20, []string{"grpc+tcp://" + silent}, []byte("w")}}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addrA, ClientOptions{StallTimeout: 300 * time.Millisecond, TrustLocation: trustAll})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	got, err := c.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	t.Logf("the silent replica skipped, the rows fetched from the next in %v", time.Since(start).Round(time.Millisecond))
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	start = time.Now()
	_, err = c.Get(ctx, "y")
	if !errors.Is(err, ErrStalled) || ctx.Err() != nil {
		t.Fatalf("no replica left: %v (after %v)", err, time.Since(start))
	}
	t.Logf("no replica left: %v", err)
}

// 10,000 hostile DoPuts against a server with the zero Options, and
// 10,000 hostile answers to a client with the zero ClientOptions: each
// gets its status or error, within the heap bounds.
func TestHostileHeap(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		_, addr := serve(t, Options{Logger: quiet})
		conn := dlgrpctest.Dial(t, addr)
		cases := hostilePuts(t)
		ctx := ctxT(t)
		dlgrpctest.HeapRun(t, func(i int) error {
			tc := cases[i%len(cases)]
			_, err := dlgrpctest.Stream(ctx, conn, methodDoPut, tc.msgs...)
			if status.Code(err) != tc.code {
				return errors.Join(errors.New(tc.name), err)
			}
			return nil
		})
	})
	t.Run("client", func(t *testing.T) {
		cases := hostileGets(t)
		var next atomic.Int32
		c := dial(t, serveHostile(t, cases, &next), ClientOptions{})
		ctx := ctxT(t)
		dlgrpctest.HeapRun(t, func(i int) error {
			k := i % len(cases)
			next.Store(int32(k))
			if _, err := c.Get(ctx, "x"); !errors.Is(err, cases[k].is) {
				return errors.Join(errors.New(cases[k].name), err)
			}
			return nil
		})
	})
}

// hugeChildren is the schema message meta with the children vector of
// its field (a FixedSizeList's, which has one child) claiming 2^32-1
// entries: the length word of the vector, found as the only 1 followed
// by the offset of the child table.
func hugeChildren(t testing.TB, meta []byte) []byte {
	b := arrowfb.Buf(meta)
	root, _ := b.Deref(0)
	msg, _ := b.Table(root)
	schema, _, ok := msg.SubTable(8)
	if !ok {
		t.Fatal("no schema")
	}
	start, n, ok := schema.Vector(6, 4)
	if !ok || n != 1 {
		t.Fatal("no field")
	}
	fp, _ := b.Deref(start)
	field, _ := b.Table(fp)
	cs, cn, ok := field.Vector(14, 4) // Field.children
	if !ok || cn != 1 {
		t.Fatalf("children: %d", cn)
	}
	out := append([]byte{}, meta...)
	binary.LittleEndian.PutUint32(out[cs-4:], 0xFFFFFFFF)
	return out
}

// encodeWith is encode with options of arrow-go's writer.
func encodeWith(t testing.TB, rec arrow.RecordBatch, opts ...ipc.Option) []*flight.FlightData {
	var c capture
	w := flight.NewRecordWriter(&c, append([]ipc.Option{ipc.WithSchema(rec.Schema())}, opts...)...)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec.Release()
	return c
}
