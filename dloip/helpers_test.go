package dloip

import (
	"context"
	"crypto/rand"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testTensor is a test producer: bytes of a dtype and shape, counting the
// releases of its owner.
type testTensor struct {
	dt       dlpack.DataType
	shape    []int64
	strides  []int64
	data     []byte
	released *atomic.Int32
}

type countingOwner struct{ n *atomic.Int32 }

func (o countingOwner) ReleaseTensor() { o.n.Add(1) }

func newRaw(t testing.TB, dt dlpack.DataType, shape ...int64) *testTensor {
	n := int64(dt.ItemSize())
	for _, d := range shape {
		n *= d
	}
	data := dlpack.AlignedSlice[byte](int(n))
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if dt == dlpack.Bool {
		for i := range data {
			data[i] &= 1
		}
	}
	return &testTensor{dt: dt, shape: shape, data: data, released: new(atomic.Int32)}
}

func (r *testTensor) DescribeTensor(d *dlpack.Description) error {
	*d = dlpack.Description{DType: r.dt, Shape: r.shape, Strides: r.strides, Size: uintptr(len(r.data)), Owner: countingOwner{r.released}, ReadOnly: true}
	if len(r.data) > 0 {
		d.Data = unsafe.Pointer(&r.data[0])
	}
	return nil
}

func (r *testTensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }
func (r *testTensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(r, req)
}

// serve starts a server on a loopback port and stops it at the end.
func serve(t testing.TB, opts Options, models ...Model) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(opts)
	for _, m := range models {
		if err := s.Register(m); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Shutdown()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, lis.Addr().String()
}

func dial(t testing.TB, addr string, opts ClientOptions) *Client {
	t.Helper()
	c, err := Dial(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoModel answers each input as an output of the same name, datatype
// and shape.
func echoModel(name string, inputs ...TensorMetadata) Model {
	meta := ModelMetadata{Name: name, Versions: []string{"1"}, Platform: "go", Inputs: inputs, Outputs: inputs}
	return ModelFunc(meta, echo)
}

// echo answers each input as an output of the same name.
func echo(_ context.Context, req *Request) ([]Output, error) {
	outs := make([]Output, len(req.Inputs))
	for i, in := range req.Inputs {
		outs[i] = Output{Name: in.Name(), Tensor: in}
	}
	return outs, nil
}

// wantStatus fails unless err is a status of code whose message has
// every one of parts.
func wantStatus(t testing.TB, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("message %q lacks %q", st.Message(), p)
		}
	}
}

func gcWait() {
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
}

// releasedN waits (collecting garbage) until r was released n times; it
// reports whether it was, for goroutines that may not call t.Fatal.
func releasedN(r *testTensor, n int32) bool {
	for i := 0; r.released.Load() != n && i < 200; i++ {
		gcWait()
	}
	return r.released.Load() == n
}

// countN waits (collecting garbage) until c reaches n and reports
// whether it did: a server releases what it sent after its send
// returns, which may be after the client read the response.
func countN(c *atomic.Int32, n int32) bool {
	for i := 0; c.Load() != n && i < 200; i++ {
		gcWait()
	}
	return c.Load() == n
}

// dynamicEcho is "echo", a Dynamic model that answers every input, of
// any name, datatype and shape, as an output of the same name.
func dynamicEcho() Model { return ModelFunc(ModelMetadata{Name: "echo", Dynamic: true}, echo) }
