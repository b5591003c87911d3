package dlflight

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// FuzzFlightData: any bytes a peer sends as a FlightData are read as
// protobuf reads them (the same descriptor, header, app metadata and
// body, or refused with dlgrpc.ErrMalformed), the body alone copied,
// into 64-byte aligned memory that comes back when released.
func FuzzFlightData(f *testing.F) {
	for _, fd := range encode(f, fslRecord(4, floats(8), ext("[4]"), nil)) {
		fd.FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"x"}}
		fd.AppMetadata = []byte("m")
		b, _ := proto.Marshal(fd)
		f.Add(b)
	}
	for _, h := range hostilePuts(f) {
		for _, m := range h.msgs {
			f.Add(m)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
		fr := &inFrame{alloc: alloc}
		if err := fr.UnmarshalWire(mem.BufferSlice{mem.SliceBuffer(b)}); err != nil {
			t.Fatal(err)
		}
		var want flight.FlightData
		errWant := proto.Unmarshal(b, &want)
		if (errWant == nil) != (fr.err == nil) {
			t.Fatalf("protobuf says %v, the frame %v", errWant, fr.err)
		}
		if fr.err == nil {
			var body []byte
			if fr.body != nil {
				body = fr.body.Bytes()
				if len(body) > 0 && !aligned(body) {
					t.Fatal("a body off 64 bytes")
				}
			}
			if !proto.Equal(fr.desc, want.FlightDescriptor) || !bytes.Equal(fr.header, want.DataHeader) ||
				!bytes.Equal(fr.appMeta, want.AppMetadata) || !bytes.Equal(body, want.DataBody) {
				t.Fatalf("the frame reads another FlightData than protobuf")
			}
			if fr.body != nil {
				fr.body.Release()
			}
		}
		if alloc.CurrentAlloc() != 0 {
			t.Fatalf("%d bytes held", alloc.CurrentAlloc())
		}
	})
}

// FuzzTicket: any ticket and any descriptor command a peer sends are a
// name, a range or a range put, or an error: never a panic, and a range
// always lies within the tensor it names.
func FuzzTicket(f *testing.F) {
	f.Add(RangeTicket("w", 0, 10))
	f.Add([]byte("w"))
	f.Add([]byte(putMagic + `{"name":"w","upload":"u","dtype":"float32","shape":[10,4],"from":0,"to":5}`))
	f.Add([]byte(rangeMagic + `{"name":"w","from":5,"to":2}`))
	l, _ := layoutOf(dlpack.Float32, []int64{10, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, ranged, err := parseTicket(b); err == nil && ranged {
			if rl, err := l.rowsOf(r.From, r.To); err == nil && (r.From < 0 || r.To > l.rows || rl.nbytes > l.nbytes) {
				t.Fatalf("rows %d to %d taken from %d", r.From, r.To, l.rows)
			}
		}
		for _, d := range []*flight.FlightDescriptor{{Type: flight.DescriptorCMD, Cmd: b}, {Type: flight.DescriptorPATH, Path: []string{string(b)}}} {
			if p, ok, err := parsePutRange(d); ok && err == nil {
				if p.From < 0 || p.To > p.l.rows || p.From >= p.To {
					t.Fatalf("range put of rows %d to %d of %d", p.From, p.To, p.l.rows)
				}
			}
			_, _ = nameOf(d)
		}
	})
}

// FuzzFlightInfo: any FlightInfo a server answers (its app metadata,
// schema and endpoints) describes a tensor whose layout holds, with
// endpoints that cover its rows in order, or is refused with an error.
func FuzzFlightInfo(f *testing.F) {
	for _, c := range hostileGets(f) {
		if c.info != nil {
			f.Add(c.info)
		}
	}
	s, _ := serve(f, Options{EndpointBytes: 64})
	src := newRaw(f, dlpack.Float32, 10, 4)
	if err := s.Register("w", src); err != nil {
		f.Fatal(err)
	}
	e, _ := s.acquire("w")
	b, _ := proto.Marshal(s.info("w", e))
	e.drop()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var fi flight.FlightInfo
		if proto.Unmarshal(b, &fi) != nil {
			return
		}
		i, err := infoOf(&fi)
		if err != nil {
			return
		}
		l, err := layoutOf(i.DType, i.Shape)
		if err != nil {
			return
		}
		eps, several, err := endpointsOf(&fi, l)
		if err != nil || !several {
			return
		}
		at := int64(0)
		for _, ep := range eps {
			if ep.from != at || ep.to < ep.from {
				t.Fatalf("endpoints do not cover the rows in order: %+v", eps)
			}
			at = ep.to
		}
		if at != l.rows {
			t.Fatalf("endpoints cover %d of %d rows", at, l.rows)
		}
	})
}

// FuzzSchema: any schema message a peer sends (a FlightInfo's schema,
// the first message of a stream) is a tensor layout whose sizes hold, or
// is refused with an error: never handed to arrow-go unverified (a field
// list claiming 2^31 children, found by this target, ended the process
// in arrow-go's reader).
func FuzzSchema(f *testing.F) {
	for _, shape := range [][]int64{{}, {5}, {3, 4}, {2, 3, 4}} {
		l, _ := layoutOf(dlpack.Float32, shape)
		f.Add(flight.SerializeSchema(l.schema("t"), memory.DefaultAllocator))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		schema, err := deserializeSchema(b)
		if err != nil {
			return
		}
		l, err := checkSchema(schema)
		if err != nil {
			return
		}
		if l.width < 1 || l.rowBytes() < 1 || (l.rows >= 0 && l.nbytes != l.rows*l.rowBytes()) {
			t.Fatalf("layout %+v", l)
		}
	})
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Align == 0 }
