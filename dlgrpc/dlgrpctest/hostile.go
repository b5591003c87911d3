package dlgrpctest

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Raw is a gRPC codec that moves messages as they are on the wire: it
// sends a []byte and receives into a *[]byte. A hostile peer speaks it
// to send what no protobuf library would write.
type Raw struct{}

// Name is "proto", the content-subtype every peer speaks.
func (Raw) Name() string { return "proto" }

func (Raw) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("dlgrpctest: Raw sends []byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (Raw) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("dlgrpctest: Raw receives into *[]byte")
	}
	*p = data.Materialize()
	return nil
}

// Dial connects to addr speaking Raw, with no message limit of its own.
func Dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Raw{}), grpc.MaxCallSendMsgSize(1<<30), grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Unary sends req as the request of a unary call of method.
func Unary(ctx context.Context, conn *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	var resp []byte
	err := conn.Invoke(ctx, method, req, &resp)
	return resp, err
}

// Stream sends reqs as the messages of a streaming call of method and
// returns the messages it answers, up to the call's end.
func Stream(ctx context.Context, conn *grpc.ClientConn, method string, reqs ...[]byte) ([][]byte, error) {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if err := s.SendMsg(r); err != nil {
			break // the server ended the call: its status follows
		}
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		var b []byte
		if err := s.RecvMsg(&b); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, b)
	}
}

// Serve runs a hostile server on loopback that answers every call of
// any method with the messages answer gives for the first message it
// received (one for a unary call; any number for a stream), or its
// error, until the test ends. It returns the address.
func Serve(t testing.TB, answer func(method string, req []byte) ([][]byte, error)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ForceServerCodecV2(Raw{}), grpc.MaxRecvMsgSize(1<<30), grpc.MaxSendMsgSize(1<<30),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			method, _ := grpc.MethodFromServerStream(ss)
			var req []byte
			if err := ss.RecvMsg(&req); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			msgs, err := answer(method, req)
			for _, m := range msgs {
				if err := ss.SendMsg(m); err != nil {
					return err
				}
			}
			return err
		}))
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// Overlong is a varint of eleven bytes: protobuf's decoder refuses a
// varint of more than ten.
var Overlong = []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}

// TenthAboveOne is a varint of ten bytes whose tenth is 2: protobuf's
// decoder refuses it (it overflows 64 bits), and a decoder that only
// counts bytes takes it.
var TenthAboveOne = []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}

// Field appends the field num of type typ with the raw value v (a
// length-delimited field gets its length first).
func Field(b []byte, num protowire.Number, typ protowire.Type, v []byte) []byte {
	b = protowire.AppendTag(b, num, typ)
	if typ == protowire.BytesType {
		b = protowire.AppendVarint(b, uint64(len(v)))
	}
	return append(b, v...)
}

// Heap measures what the process allocates and keeps (runtime/metrics):
// Allocated is the cumulative bytes allocated on the heap, Objects the
// bytes of heap objects now, live or garbage not yet collected, Live
// the bytes of live heap objects after a garbage collection.
type Heap struct{}

// Objects is the bytes of the heap's objects, live and not yet
// collected.
func (Heap) Objects() uint64 { return read("/memory/classes/heap/objects:bytes") }

// Allocated is the bytes allocated on the heap since the process began.
func (Heap) Allocated() uint64 { return read("/gc/heap/allocs:bytes") }

// Live collects garbage and returns the bytes of the live heap objects.
func (Heap) Live() uint64 {
	runtime.GC()
	return read("/memory/classes/heap/objects:bytes")
}

func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
