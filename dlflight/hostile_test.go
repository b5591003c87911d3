package dlflight

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// capture keeps copies of the FlightData arrow-go's writer sends.
type capture []*flight.FlightData

func (c *capture) Send(fd *flight.FlightData) error {
	*c = append(*c, proto.Clone(fd).(*flight.FlightData))
	return nil
}

// stream encodes rec with arrow-go's own Flight writer (its schema and
// metadata as given).
func encode(t testing.TB, rec arrow.RecordBatch) []*flight.FlightData {
	var c capture
	w := flight.NewRecordWriter(&c, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec.Release()
	return c
}

// fslRecord is a one-column record of a FixedSizeList<w> of float32
// values (nil entries are nulls), with the given field and schema
// metadata.
func fslRecord(w int32, vals []*float32, fieldMeta, schemaMeta map[string]string) arrow.RecordBatch {
	b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, w, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	for i, v := range vals {
		if i%int(w) == 0 {
			b.Append(true)
		}
		if v == nil {
			vb.AppendNull()
		} else {
			vb.Append(*v)
		}
	}
	col := b.NewArray()
	defer col.Release()
	fm, sm := arrow.MetadataFrom(fieldMeta), arrow.MetadataFrom(schemaMeta)
	schema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: col.DataType(), Metadata: fm}}, &sm)
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
}

func floats(n int) []*float32 {
	out := make([]*float32, n)
	for i := range out {
		v := float32(i)
		out[i] = &v
	}
	return out
}

func ext(shape string) map[string]string {
	return map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":` + shape + `}`}
}

// TestHostileBatches sends streams that lie; each gets InvalidArgument,
// everything received is released, and the server goes on serving.
func TestHostileBatches(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{Allocator: alloc})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := flight.NewFlightServiceClient(conn)
	ctx := ctxT(t)

	cases := lyingStreams(t)
	for name, mk := range cases {
		fds := mk()
		stream, err := raw.DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fds[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"evil"}}
		for _, fd := range fds {
			if err := stream.Send(fd); err != nil {
				break
			}
		}
		stream.CloseSend()
		_, err = stream.Recv()
		wantCodeNamed(t, name, err, codes.InvalidArgument)
		t.Logf("%s: %d bytes held", name, alloc.CurrentAlloc())
	}
	if len(s.Names()) != 0 {
		t.Fatalf("held after hostile puts: %v", s.Names())
	}
	alloc.AssertSize(t, 0)
	// the server still serves
	c := dial(t, addr, ClientOptions{})
	src := newRaw(t, dlpack.Float32, 4, 4)
	if err := c.Put(ctx, "ok", src); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	s.Unregister("ok")
	alloc.AssertSize(t, 0)
}

func wantCodeNamed(t testing.TB, name string, err error, code codes.Code) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("case %q", name)
		}
	}()
	wantCode(t, err, code)
}

// lyingStreams are Flight streams whose schema or batches lie, each made
// by arrow-go's own writer (then altered).
func lyingStreams(t testing.TB) map[string]func() []*flight.FlightData {
	withNull := floats(8)
	withNull[5] = nil
	utf8Col := func() arrow.RecordBatch {
		b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, 2, arrow.BinaryTypes.String)
		defer b.Release()
		b.Append(true)
		b.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
		col := b.NewArray()
		defer col.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: col.DataType(), Metadata: arrow.MetadataFrom(ext("[2]"))}}, nil)
		return array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	}
	boolCol := func() arrow.RecordBatch {
		b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, 2, arrow.FixedWidthTypes.Boolean)
		defer b.Release()
		b.Append(true)
		b.ValueBuilder().(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil)
		col := b.NewArray()
		defer col.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: col.DataType(), Metadata: arrow.MetadataFrom(ext("[2]"))}}, nil)
		return array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	}
	truncated := func() []*flight.FlightData {
		fds := encode(t, fslRecord(4, floats(64), ext("[4]"), nil))
		last := fds[len(fds)-1]
		last.DataBody = last.DataBody[:len(last.DataBody)/2]
		return fds
	}
	return map[string]func() []*flight.FlightData{
		"metadata shape disagrees with the storage": func() []*flight.FlightData { return encode(t, fslRecord(4, floats(8), ext("[3]"), nil)) },
		"nulls in the values":                       func() []*flight.FlightData { return encode(t, fslRecord(4, withNull, ext("[4]"), nil)) },
		"extension shape overflows": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), ext("[4611686018427387905,4]"), nil))
		},
		"tensor shape overflows": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), ext("[4]"), map[string]string{MetaShape: "[4611686018427387905,4]"}))
		},
		"tensor shape disagrees with the rows": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), ext("[4]"), map[string]string{MetaShape: "[3,4]"}))
		},
		"dtype disagrees": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), ext("[4]"), map[string]string{MetaShape: "[2,4]", MetaDType: "float64"}))
		},
		"negative dimension": func() []*flight.FlightData { return encode(t, fslRecord(4, floats(8), ext("[-4]"), nil)) },
		"permuted": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"permutation":[1,0]}`}, nil))
		},
		"permutation shorter than the shape": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"permutation":[0]}`}, nil))
		},
		"permutation longer than the shape": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"permutation":[0,1,2]}`}, nil))
		},
		"empty permutation": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"permutation":[]}`}, nil))
		},
		"dim_names shorter than the shape": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"dim_names":["x"]}`}, nil))
		},
		"dim_names longer than the shape": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"dim_names":["x","y","z"]}`}, nil))
		},
		"dim_names not strings": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"dim_names":[1,2]}`}, nil))
		},
		"dim_names not a list": func() []*flight.FlightData {
			return encode(t, fslRecord(4, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: `{"shape":[2,2],"dim_names":"xy"}`}, nil))
		},
		"not an extension": func() []*flight.FlightData { return encode(t, fslRecord(4, floats(8), nil, nil)) },
		"strings":          func() []*flight.FlightData { return encode(t, utf8Col()) },
		"booleans":         func() []*flight.FlightData { return encode(t, boolCol()) },
		"garbage header": func() []*flight.FlightData {
			fds := encode(t, fslRecord(4, floats(8), ext("[4]"), nil))
			fds[1].DataHeader = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}
			return fds
		},
		"truncated body": truncated,
	}
}

// liar is a Flight server that answers every DoGet with the stream named
// by the ticket.
type liar struct {
	flight.BaseFlightServer
	streams map[string]func() []*flight.FlightData
}

func (l *liar) DoGet(tk *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	for _, fd := range l.streams[string(tk.Ticket)]() {
		if err := stream.Send(fd); err != nil {
			return err
		}
	}
	return nil
}

// TestLyingServer: the client refuses every lying stream from a server
// with ErrInvalid and releases what it received.
func TestLyingServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	streams := lyingStreams(t)
	gs := grpc.NewServer()
	flight.RegisterFlightServiceServer(gs, &liar{streams: streams})
	go gs.Serve(lis)
	defer gs.Stop()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c := dial(t, lis.Addr().String(), ClientOptions{Allocator: alloc})
	for name := range streams {
		tt, err := c.Get(ctxT(t), name)
		if !errors.Is(err, ErrInvalid) {
			if tt != nil {
				tt.Close()
			}
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
		alloc.AssertSize(t, 0)
	}
}

// The canonical extension metadata's optional fields, when they have one
// entry per dimension (an identity permutation, string dim_names), are
// taken: only the lies above are refused.
func TestExtensionMetadataAccepted(t *testing.T) {
	s, addr := serve(t, Options{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := flight.NewFlightServiceClient(conn)
	for i, meta := range []string{
		`{"shape":[2,2],"permutation":[0,1],"dim_names":["x","y"]}`,
		`{"shape":[2,2],"dim_names":null}`,
		`{"shape":[4],"dim_names":["x"]}`,
	} {
		w := int32(4)
		fds := encode(t, fslRecord(w, floats(8), map[string]string{extNameKey: extensionName, extMetaKey: meta}, nil))
		name := fmt.Sprint("ok", i)
		fds[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}}
		stream, err := raw.DoPut(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			if err := stream.Send(fd); err != nil {
				t.Fatal(err)
			}
		}
		stream.CloseSend()
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("%s: %v", meta, err)
		}
		if !slices.Contains(s.Names(), name) {
			t.Fatalf("%s: not stored", meta)
		}
	}
}
