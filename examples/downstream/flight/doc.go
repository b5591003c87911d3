// Package flight is a separate Go module that uses the library's Arrow
// Flight bridge, github.com/godlpack/dlpack/dlflight, as a service
// would: it requires the core and dlflight and nothing else of the
// repository. The test command builds and tests it from a copy outside
// the repository, normally and vendored (then also -race and
// cgocheck2), and checks that its module graph holds only Flight's tree:
// arrow-go, gRPC, protobuf and what their go.mod files require (arrow-go's
// names gonum, so gonum is listed, though none of its code is built),
// never GoMLX, ONNX Runtime, another bridge or the command's progress bar.
//
// Run it from the repository root with `make downstream` (or `bash
// examples/downstream/check.sh flight`).
package flight

import (
	"context"
	"fmt"
	"net"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlflight"
)

// RoundTrip serves x as a rows x cols float32 tensor on 127.0.0.1, fetches
// it back with a dlflight client and returns the fetched values; it
// releases everything it made before it returns.
func RoundTrip(ctx context.Context, x []float32, rows, cols int64) ([]float32, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := dlflight.NewServer(dlflight.Options{})
	defer s.Shutdown()
	go s.Serve(lis)
	if err := s.Register("x", dlpack.NewArray(x, []int64{rows, cols})); err != nil {
		return nil, err
	}
	c, err := dlflight.Dial(lis.Addr().String(), dlflight.ClientOptions{})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := c.Get(ctx, "x")
	if err != nil {
		return nil, err
	}
	defer t.Close()
	f, err := dlpack.From(t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got, err := dlpack.Slice[float32](f)
	if err != nil {
		return nil, err
	}
	if sh := f.Shape(); len(sh) != 2 || sh[0] != rows || sh[1] != cols {
		return nil, fmt.Errorf("fetched shape %v, want [%d %d]", sh, rows, cols)
	}
	return append([]float32(nil), got...), nil
}
