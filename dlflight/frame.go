package dlflight

import (
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/grpc/mem"
)

// Flight's messages are protobuf; FlightData's body is a bytes field
// (number 1000) that protobuf-go would copy into a Go slice of whatever
// alignment the allocator gives, after gRPC has already gathered the
// HTTP/2 frames into one buffer. The shared wire layer reads and writes
// FlightData itself (dlgrpc.Decode, dlgrpc.Writer): receiving, the body
// is copied once, straight from gRPC's frame buffers into a 64-byte
// aligned buffer of the caller's allocator, which the record batch then
// shares, and every other field goes to protobuf; sending, the IPC body's
// large buffers (the tensor's own memory) go to gRPC as they are,
// holding the tensor until gRPC has written them. Every other message
// goes to gRPC's proto codec.

// Field numbers of arrow.flight.protocol.FlightData.
const (
	fieldDescriptor  = 1
	fieldDataHeader  = 2
	fieldAppMetadata = 3
	fieldDataBody    = 1000
)

// outFrame is a FlightData to send whose body is the concatenation of
// parts (the IPC body buffers and their padding), not copied before
// gRPC's writer.
type outFrame struct {
	desc    *flight.FlightDescriptor
	header  []byte
	appMeta []byte
	body    [][]byte
	// keep, when set, holds the memory of body: large parts are then
	// given to gRPC without a copy, each holding a reference to keep.
	keep *dlgrpc.Hold
	// guard, when set, is the memory of a file mapping that body lies in
	// (a tensorfile tensor): every part is then copied, in MarshalWire,
	// with a fault of a file cut short turned into err.
	guard []byte
	err   error
}

func (f *outFrame) MarshalWire() (mem.BufferSlice, error) {
	w := dlgrpc.NewWriter(f.keep)
	if f.desc != nil {
		w.Field(fieldDescriptor, f.desc)
	}
	if len(f.header) > 0 {
		w.Bytes(fieldDataHeader, f.header)
	}
	if len(f.appMeta) > 0 {
		w.Bytes(fieldAppMetadata, f.appMeta)
	}
	n := 0
	for _, p := range f.body {
		n += len(p)
	}
	if n > 0 {
		w.Tensor(fieldDataBody, f.body, f.guard)
	}
	b, err := w.Marshal()
	if err != nil {
		f.err = err
	}
	return b, err
}

// inFrame is a received FlightData whose body, if any, is a buffer of
// alloc (64-byte aligned) that the receiver must Release.
type inFrame struct {
	alloc   memory.Allocator
	desc    *flight.FlightDescriptor
	header  []byte
	appMeta []byte
	body    *memory.Buffer
	// err is the error UnmarshalWire met (a malformed message), kept
	// here for the receiver, which answers it with its own status:
	// UnmarshalWire returns nil, as gRPC would answer any error of a
	// codec with codes.Internal.
	err error
}

func (f *inFrame) UnmarshalWire(data mem.BufferSlice) error {
	var rest flight.FlightData
	err := dlgrpc.Decode(data, fieldDataBody, func(n int) ([]byte, error) {
		// a second body replaces the first, as protobuf's last value
		// of a field wins
		if f.body != nil {
			f.body.Release()
		}
		if p, ok := f.alloc.(*placer); ok {
			p.next = n
		}
		f.body = memory.NewResizableBuffer(f.alloc)
		f.body.Resize(n)
		return f.body.Bytes(), nil
	}, &rest)
	if err != nil {
		if f.body != nil {
			f.body.Release()
			f.body = nil
		}
		f.err = err
		return nil
	}
	f.desc, f.header, f.appMeta = rest.FlightDescriptor, rest.DataHeader, rest.AppMetadata
	return nil
}
