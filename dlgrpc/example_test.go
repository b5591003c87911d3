package dlgrpc_test

import (
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A message of a gRPC service of your own whose field 2 carries a
// tensor's bytes: written from the tensor's memory (no copy into the
// message; the Hold keeps the tensor until gRPC has sent it), and read
// back into an aligned buffer that the received Tensor shares. The other
// fields (here field 1, a name) go to protobuf both ways.
func ExampleWriter_Tensor() {
	x := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	f, err := dlpack.From(x)
	if err != nil {
		panic(err)
	}
	b, first, err := dlpack.ReadOnlyBytes(f) // the tensor's memory (compact row-major)
	if err != nil {
		panic(err)
	}
	hold := dlgrpc.NewHold(func() { f.Close() }, nil) // runs once gRPC (here, Free) is done
	w := dlgrpc.NewWriter(hold)
	w.Message(wrapperspb.String("x")) // field 1: the name
	w.Tensor(2, [][]byte{b[first : first+int(f.NBytes())]}, nil)
	wire, err := w.Marshal() // what a Marshaler's MarshalWire returns to gRPC
	hold.Drop()
	if err != nil {
		panic(err)
	}

	var body []byte
	name := &wrapperspb.StringValue{}
	err = dlgrpc.Decode(wire, 2, func(n int) ([]byte, error) {
		body = dlgrpc.DefaultAllocator.Allocate(n)
		return body, nil
	}, name)
	wire.Free()
	if err != nil {
		panic(err)
	}
	t, err := dlgrpc.NewTensor(dlpack.Float32, []int64{2, 3}, body, false, func() { dlgrpc.DefaultAllocator.Free(body) })
	if err != nil {
		panic(err)
	}
	defer t.Close()
	g, _ := dlpack.From(t)
	defer g.Close()
	ys, _ := dlpack.ReadOnlySlice[float32](g)
	fmt.Println(name.GetValue(), t.Shape(), ys, t.Aligned())
	// Output: x [2 3] [1 2 3 4 5 6] true
}
