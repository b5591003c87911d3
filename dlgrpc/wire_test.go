package dlgrpc

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// testMessage is a message of the shape the services' large messages
// have: strings, a repeated int64, a nested message, a map, and a
// repeated bytes field (7) of tensor bytes. testOuter wraps one, as an
// inference stream's response wraps a response: a string (1) and the
// message (2).
var testMessage, testOuter = func() (protoreflect.MessageDescriptor, protoreflect.MessageDescriptor) {
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	field := func(name string, num int32, label descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, msg string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label.Enum(), Type: typ.Enum(), JsonName: proto.String(name)}
		if msg != "" {
			f.TypeName = proto.String(msg)
		}
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("dlgrpc_test.proto"), Package: proto.String("dlgrpctest"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Request"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("name", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("shape", 2, rep, descriptorpb.FieldDescriptorProto_TYPE_INT64, ""),
				field("inner", 3, rep, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".dlgrpctest.Request.Inner"),
				field("id", 4, opt, descriptorpb.FieldDescriptorProto_TYPE_FIXED64, ""),
				field("raw", 7, rep, descriptorpb.FieldDescriptorProto_TYPE_BYTES, ""),
			},
			NestedType: []*descriptorpb.DescriptorProto{{
				Name: proto.String("Inner"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("label", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
					field("raw", 7, opt, descriptorpb.FieldDescriptorProto_TYPE_BYTES, ""),
				},
			}},
		}, {
			Name: proto.String("Outer"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("error", 1, opt, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("request", 2, opt, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".dlgrpctest.Request"),
			},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		panic(err)
	}
	return f.Messages().Get(0), f.Messages().Get(1)
}()

// outerField is testOuter's field that holds a testMessage.
const outerField = 2

const rawField = 7

// decodeBoth decodes b with protobuf and with Decode (b cut into pieces
// of piece bytes, so that varints and fields straddle gRPC's buffers),
// and fails unless both accept it and mean the same message, or both
// refuse it.
func decodeBoth(t testing.TB, b []byte, piece int) {
	t.Helper()
	want := dynamicpb.NewMessage(testMessage)
	errWant := proto.Unmarshal(b, want)
	var data mem.BufferSlice
	for i := 0; i < len(b); i += piece {
		data = append(data, mem.SliceBuffer(b[i:min(len(b), i+piece)]))
	}
	got := dynamicpb.NewMessage(testMessage)
	var raws [][]byte
	err := Decode(data, rawField, func(n int) ([]byte, error) {
		r := make([]byte, n)
		raws = append(raws, r)
		return r, nil
	}, got)
	if (err == nil) != (errWant == nil) {
		t.Fatalf("% x: protobuf says %v, Decode %v", b, errWant, err)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("% x: %v does not wrap ErrMalformed", b, err)
		}
		return
	}
	list := got.Mutable(testMessage.Fields().ByNumber(rawField)).List()
	for _, r := range raws {
		list.Append(protoreflect.ValueOfBytes(r))
	}
	if !proto.Equal(got, want) {
		t.Fatalf("% x: Decode reads %v, protobuf %v", b, got, want)
	}
}

// decodeNestedBoth decodes b as a testOuter with protobuf and with
// DecodePath (the tensor field inside the wrapped message), and fails
// unless both accept it and mean the same message, or both refuse it.
func decodeNestedBoth(t testing.TB, b []byte, piece int) {
	t.Helper()
	want := dynamicpb.NewMessage(testOuter)
	errWant := proto.Unmarshal(b, want)
	var data mem.BufferSlice
	for i := 0; i < len(b); i += piece {
		data = append(data, mem.SliceBuffer(b[i:min(len(b), i+piece)]))
	}
	got := dynamicpb.NewMessage(testOuter)
	var raws [][]byte
	err := DecodePath(data, []protowire.Number{outerField, rawField}, func(n int) ([]byte, error) {
		r := make([]byte, n)
		raws = append(raws, r)
		return r, nil
	}, got)
	if (err == nil) != (errWant == nil) {
		t.Fatalf("% x: protobuf says %v, DecodePath %v", b, errWant, err)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("% x: %v does not wrap ErrMalformed", b, err)
		}
		return
	}
	if len(raws) > 0 {
		inner := got.Mutable(testOuter.Fields().ByNumber(outerField)).Message()
		list := inner.Mutable(testMessage.Fields().ByNumber(rawField)).List()
		for _, r := range raws {
			list.Append(protoreflect.ValueOfBytes(r))
		}
	}
	if !proto.Equal(got, want) {
		t.Fatalf("% x: DecodePath reads %v, protobuf %v", b, got, want)
	}
}

// DecodePath means what protobuf means for a message wrapped in another:
// every case of TestDecodeMatchesProtobuf as the wrapped message, the
// wrapped message given twice (protobuf merges the two, raw contents of
// both in order), a wrapped message whose length runs beyond the outer
// one, and a tensor field whose length runs beyond the wrapped message
// but not beyond the outer one.
func TestDecodePathMatchesProtobuf(t *testing.T) {
	cases := nestedCases()
	for _, c := range cases {
		for _, piece := range []int{1, 3, 7, 1 << 20} {
			decodeNestedBoth(t, c, piece)
		}
	}
	// one of them is well formed and has tensor bytes, or this tests
	// nothing
	m := dynamicpb.NewMessage(testOuter)
	if err := proto.Unmarshal(cases[1], m); err != nil || m.Get(testOuter.Fields().ByNumber(outerField)).Message().Get(testMessage.Fields().ByNumber(rawField)).List().Len() != 6 {
		t.Fatalf("the merged case: %v", err)
	}
}

func nestedCases() [][]byte {
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	wrap := func(b []byte) []byte {
		return protowire.AppendBytes(tag(outerField, protowire.BytesType), b)
	}
	good := decodeCases()[0]
	cases := [][]byte{
		wrap(good),
		// twice, with a string between: merged
		bytes.Join([][]byte{wrap(good), protowire.AppendString(tag(1, protowire.BytesType), "error"), wrap(good)}, nil),
		// the wrapped message's length beyond the outer message
		append(tag(outerField, protowire.BytesType), 0x7f, 1, 2),
		// a tensor field of 5 bytes in a wrapped message of 3, with
		// bytes after it in the outer message
		append(wrap(append(tag(rawField, protowire.BytesType), 5, 1)), 1, 2, 3, 4, 5),
		// the outer field under another wire type
		append(tag(outerField, protowire.VarintType), 1),
		// an empty wrapped message
		wrap(nil),
	}
	for _, c := range decodeCases() {
		cases = append(cases, wrap(c), append(wrap(c), c...))
	}
	return cases
}

// Decode means what protobuf means, for messages protobuf-go writes and
// for the edge cases of its wire format: every varint length, the tenth
// varint byte above 1, lengths beyond the message, field numbers out of
// range, reserved wire types, groups (closed, unclosed, nested, holding
// the tensor field), the tensor field under another wire type.
func TestDecodeMatchesProtobuf(t *testing.T) {
	for _, c := range decodeCases() {
		for _, piece := range []int{1, 3, 7, 1 << 20} {
			decodeBoth(t, c, piece)
		}
	}
}

func decodeCases() [][]byte {
	m := dynamicpb.NewMessage(testMessage)
	fs := testMessage.Fields()
	m.Set(fs.ByNumber(1), protoreflect.ValueOfString("x"))
	sh := m.Mutable(fs.ByNumber(2)).List()
	sh.Append(protoreflect.ValueOfInt64(3))
	sh.Append(protoreflect.ValueOfInt64(-1))
	raw := m.Mutable(fs.ByNumber(rawField)).List()
	raw.Append(protoreflect.ValueOfBytes([]byte{1, 2, 3}))
	raw.Append(protoreflect.ValueOfBytes(nil))
	raw.Append(protoreflect.ValueOfBytes(bytes.Repeat([]byte{9}, 300)))
	inner := m.Mutable(fs.ByNumber(3)).List().AppendMutable().Message()
	inner.Set(inner.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfString("in"))
	inner.Set(inner.Descriptor().Fields().ByNumber(7), protoreflect.ValueOfBytes([]byte{5}))
	good, _ := proto.Marshal(m)
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		good,
		nil,
		cat(tag(7, protowire.BytesType), []byte{0}),
		// a varint of ten bytes whose tenth is 1 (the largest), then 2
		cat(tag(2, protowire.VarintType), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		cat(tag(2, protowire.VarintType), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}),
		cat(tag(7, protowire.BytesType), []byte{0x83, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, []byte{1, 2, 3}),
		cat(tag(7, protowire.BytesType), []byte{0x83, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, []byte{1, 2, 3}),
		// eleven bytes, a truncated varint
		cat(tag(2, protowire.VarintType), bytes.Repeat([]byte{0x80}, 10), []byte{0}),
		cat(tag(2, protowire.VarintType), []byte{0x80}),
		// lengths beyond the message
		cat(tag(7, protowire.BytesType), []byte{5, 1, 2}),
		cat(tag(1, protowire.BytesType), []byte{0xff, 0xff, 0xff, 0xff, 0x0f}),
		// field numbers 0, 2^29-1 (the largest), 2^29
		cat(protowire.AppendVarint(nil, 0<<3|2), []byte{0}),
		cat(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber)<<3), []byte{1}),
		cat(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), []byte{1}),
		// reserved wire types
		cat(protowire.AppendVarint(nil, 9<<3|6), []byte{1}),
		cat(protowire.AppendVarint(nil, 9<<3|7), []byte{1}),
		// groups: closed, unclosed, closed by another number, holding
		// field 7, nested, an end without a start, a large number
		// inside
		cat(tag(9, protowire.StartGroupType), tag(1, protowire.VarintType), []byte{1}, tag(9, protowire.EndGroupType)),
		cat(tag(9, protowire.StartGroupType), tag(1, protowire.VarintType), []byte{1}),
		cat(tag(9, protowire.StartGroupType), tag(8, protowire.EndGroupType)),
		cat(tag(9, protowire.StartGroupType), tag(7, protowire.BytesType), []byte{1, 7}, tag(9, protowire.EndGroupType), tag(7, protowire.BytesType), []byte{1, 8}),
		cat(tag(9, protowire.StartGroupType), tag(10, protowire.StartGroupType), tag(10, protowire.EndGroupType), tag(9, protowire.EndGroupType)),
		cat(tag(9, protowire.EndGroupType)),
		cat(tag(9, protowire.StartGroupType), protowire.AppendVarint(nil, uint64(1<<30)<<3), []byte{1}, tag(9, protowire.EndGroupType)),
		cat(tag(9, protowire.StartGroupType), protowire.AppendVarint(nil, uint64(1<<31)<<3), []byte{1}, tag(9, protowire.EndGroupType)),
		// the tensor field under other wire types, and unknown fields
		cat(tag(7, protowire.VarintType), []byte{3}, tag(7, protowire.BytesType), []byte{1, 4}),
		cat(tag(7, protowire.Fixed32Type), []byte{1, 2, 3, 4}, tag(99, protowire.Fixed64Type), bytes.Repeat([]byte{1}, 8)),
		cat(tag(99, protowire.Fixed64Type), []byte{1, 2}),
		// a string that is not UTF-8 (proto3 refuses it)
		cat(tag(1, protowire.BytesType), []byte{2, 0xff, 0xfe}),
		// a nested message that is malformed
		cat(tag(3, protowire.BytesType), []byte{2, 0x08, 0x80}),
	}
}

// FuzzDecode: on any bytes, Decode and protobuf's decoder agree on
// whether the message is well formed and, when it is, on what it holds;
// and so do DecodePath and protobuf on the same bytes as a message that
// wraps one.
func FuzzDecode(f *testing.F) {
	for _, c := range append(decodeCases(), nestedCases()...) {
		f.Add(c, uint8(7))
	}
	f.Fuzz(func(t *testing.T, b []byte, piece uint8) {
		decodeBoth(t, b, int(piece)%32+1)
		decodeNestedBoth(t, b, int(piece)%32+1)
	})
}

// TestWriterShares: a message whose memory is held is written with its
// large tensor part shared, not copied (the buffer gRPC writes from is
// the tensor's memory), holding a reference that gRPC's free drops; the
// bytes are the same as the copied form's, and protobuf reads them.
func TestWriterShares(t *testing.T) {
	values := make([]byte, 1<<20)
	for i := range values {
		values[i] = byte(i * 7)
	}
	pad := make([]byte, 24)
	m := dynamicpb.NewMessage(testMessage)
	m.Set(testMessage.Fields().ByNumber(1), protoreflect.ValueOfString("x"))
	build := func(h *Hold) *Writer {
		w := NewWriter(h)
		w.Message(m)
		w.Bytes(5, []byte("header"))
		w.Tensor(rawField, [][]byte{values, pad}, nil)
		w.Tensor(rawField, [][]byte{{1, 2}}, nil)
		return w
	}
	copied, err := build(nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := copied.Materialize()
	copied.Free()
	back := dynamicpb.NewMessage(testMessage)
	if err := proto.Unmarshal(want, back); err != nil {
		t.Fatal(err)
	}
	if l := back.Get(testMessage.Fields().ByNumber(rawField)).List(); l.Len() != 2 || !bytes.Equal(l.Get(0).Bytes(), append(append([]byte{}, values...), pad...)) {
		t.Fatal("protobuf reads other tensor bytes")
	}
	released := 0
	h := NewHold(func() { released++ }, nil)
	shared, err := build(h).Marshal()
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
	if h.refs.Load() != 2 || h.Pending() != 1 {
		t.Fatalf("references while gRPC holds the values: %d, pending %d", h.refs.Load(), h.Pending())
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	h.Wait(gone) // gRPC still holds the values: returns only because the call ended
	shared.Free()
	h.Wait(context.Background()) // returns: gRPC let go of them
	if h.refs.Load() != 1 || released != 0 {
		t.Fatalf("after gRPC's free: %d references, released %d", h.refs.Load(), released)
	}
	h.Drop()
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
}

// TestWriterNested: a message that wraps one with tensor fields, two
// levels deep, is written with its large tensor parts shared at both
// levels, the same bytes as the copied form's, which protobuf reads as
// the message they stand for.
func TestWriterNested(t *testing.T) {
	values := make([]byte, 1<<20)
	for i := range values {
		values[i] = byte(i * 5)
	}
	deep := make([]byte, ZeroCopyPart)
	for i := range deep {
		deep[i] = byte(i * 3)
	}
	label := dynamicpb.NewMessage(testMessage.Fields().ByNumber(3).Message())
	label.Set(label.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfString("deep"))
	head := dynamicpb.NewMessage(testMessage)
	head.Set(testMessage.Fields().ByNumber(1), protoreflect.ValueOfString("x"))
	outerHead := dynamicpb.NewMessage(testOuter)
	outerHead.Set(testOuter.Fields().ByNumber(1), protoreflect.ValueOfString("e"))
	build := func(h *Hold) *Writer {
		w := NewWriter(h)
		w.Message(outerHead)
		n := w.Nested(outerField)
		n.Message(head)
		n.Tensor(rawField, [][]byte{values}, nil)
		d := n.Nested(3)
		d.Message(label)
		d.Tensor(rawField, [][]byte{deep}, nil)
		n.Tensor(rawField, [][]byte{{1, 2}}, nil)
		w.Nested(outerField) // an empty one: protobuf merges it
		return w
	}
	copied, err := build(nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := copied.Materialize()
	copied.Free()
	// the message the bytes stand for, built by protobuf
	exp := dynamicpb.NewMessage(testOuter)
	exp.Set(testOuter.Fields().ByNumber(1), protoreflect.ValueOfString("e"))
	in := exp.Mutable(testOuter.Fields().ByNumber(outerField)).Message()
	in.Set(testMessage.Fields().ByNumber(1), protoreflect.ValueOfString("x"))
	raws := in.Mutable(testMessage.Fields().ByNumber(rawField)).List()
	raws.Append(protoreflect.ValueOfBytes(values))
	raws.Append(protoreflect.ValueOfBytes([]byte{1, 2}))
	el := in.Mutable(testMessage.Fields().ByNumber(3)).List().AppendMutable().Message()
	el.Set(el.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfString("deep"))
	el.Set(el.Descriptor().Fields().ByNumber(7), protoreflect.ValueOfBytes(deep))
	back := dynamicpb.NewMessage(testOuter)
	if err := proto.Unmarshal(want, back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, exp) {
		t.Fatalf("protobuf reads %v", back)
	}
	released := 0
	h := NewHold(func() { released++ }, nil)
	shared, err := build(h).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got := shared.Materialize(); !bytes.Equal(got, want) {
		t.Fatalf("shared form: %d bytes, differ from the copied form's %d", len(got), len(want))
	}
	found := 0
	for _, b := range shared {
		if d := b.ReadOnlyData(); len(d) > 0 && (unsafe.SliceData(d) == unsafe.SliceData(values) || unsafe.SliceData(d) == unsafe.SliceData(deep)) {
			found++
		}
	}
	if found != 2 || h.Pending() != 2 {
		t.Fatalf("%d buffers, %d of them the values themselves, %d pending", len(shared), found, h.Pending())
	}
	shared.Free()
	h.Drop()
	if released != 1 {
		t.Fatalf("released %d times", released)
	}
}

// TestWriterLost: should gRPC drop a shared buffer without freeing it (a
// connection that fails with the bytes queued), the reference it held is
// dropped once the buffer is unreachable.
func TestWriterLost(t *testing.T) {
	var released atomic.Int32
	h := NewHold(func() { released.Add(1) }, nil)
	func() {
		w := NewWriter(h)
		w.Tensor(rawField, [][]byte{make([]byte, 1<<20)}, nil)
		b, err := w.Marshal()
		if err != nil || len(b) != 2 {
			t.Fatalf("%d buffers, %v", len(b), err)
		}
	}()
	h.Drop()
	deadline := time.Now().Add(10 * time.Second)
	for released.Load() != 1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if released.Load() != 1 || h.refs.Load() != 0 {
		t.Fatalf("released %d, references %d", released.Load(), h.refs.Load())
	}
}

// TestReleasePanics: a release callback that panics (user code, run on
// gRPC's writer goroutine) is recovered and reported, not the end of
// the process.
func TestReleasePanics(t *testing.T) {
	h := NewHold(func() { panic("a release callback panics") }, discard)
	h.Drop() // would end the test binary if it were not recovered
}
