package dlgrpc

import (
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec this one defers to
	"google.golang.org/grpc/mem"
)

// codec is the services' gRPC codec: protobuf's, but for the messages
// that read or write their own wire form (Marshaler, Unmarshaler).
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

// Name is "proto": the content-subtype every peer speaks.
func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(Marshaler); ok {
		return m.MarshalWire()
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if u, ok := v.(Unmarshaler); ok {
		return u.UnmarshalWire(data)
	}
	return c.proto.Unmarshal(data, v)
}

// Codec is the services' gRPC codec (content-subtype "proto"), for a
// gRPC client or server of the program's own that exchanges their
// messages: gRPC's proto codec, except for messages that read or write
// their own wire form (Marshaler, Unmarshaler).
func Codec() encoding.CodecV2 { return newCodec() }
