package dlflight

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/testpki"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawTensor is a test producer: bytes of a dtype and shape, counting the
// releases of its owner.
type rawTensor struct {
	dt       dlpack.DataType
	shape    []int64
	data     []byte
	released *atomic.Int32
	exports  *atomic.Int32
}

type countingOwner struct{ n *atomic.Int32 }

func (o countingOwner) ReleaseTensor() { o.n.Add(1) }

func newRaw(t testing.TB, dt dlpack.DataType, shape ...int64) *rawTensor {
	n := int64(dt.ItemSize())
	for _, d := range shape {
		n *= d
	}
	data := dlpack.AlignedSlice[byte](int(n))
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	return &rawTensor{dt: dt, shape: shape, data: data, released: new(atomic.Int32), exports: new(atomic.Int32)}
}

func (r *rawTensor) DescribeTensor(d *dlpack.Description) error {
	r.exports.Add(1)
	*d = dlpack.Description{DType: r.dt, Shape: r.shape, Size: uintptr(len(r.data)), Owner: countingOwner{r.released}, ReadOnly: true}
	if len(r.data) > 0 {
		d.Data = unsafe.Pointer(&r.data[0])
	}
	return nil
}

func (r *rawTensor) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }
func (r *rawTensor) DLPack(req dlpack.Request) (dlpack.Managed, error) {
	return dlpack.Produce(r, req)
}

// allDTypes are the element types a fixed_shape_tensor carries.
var allDTypes = []dlpack.DataType{dlpack.Int8, dlpack.Int16, dlpack.Int32, dlpack.Int64,
	dlpack.Uint8, dlpack.Uint16, dlpack.Uint32, dlpack.Uint64, dlpack.Float16, dlpack.Float32, dlpack.Float64}

// serve starts a server on a loopback port and stops it at the end.
func serve(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Shutdown()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
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

// sameTensor requires got to hold want's dtype, shape and bytes.
func sameTensor(t testing.TB, got *Tensor, want *rawTensor) {
	t.Helper()
	if got.DataType() != want.dt {
		t.Fatalf("dtype %v, want %v", got.DataType(), want.dt)
	}
	if g, w := got.Shape(), want.shape; len(g) != len(w) {
		t.Fatalf("shape %v, want %v", g, w)
	} else {
		for i := range g {
			if g[i] != w[i] {
				t.Fatalf("shape %v, want %v", g, w)
			}
		}
	}
	if !bytes.Equal(got.Bytes(), want.data) {
		t.Fatalf("%v %v: bytes differ", want.dt, want.shape)
	}
}

func wantCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v (%v), want %v", status.Code(err), err, code)
	}
}

// testPKI makes a CA and a server certificate for 127.0.0.1 and
// localhost; it returns the server's TLS config and a client's.
func testPKI(t testing.TB) (server, client *tls.Config) {
	p := newPKI(t)
	return p.server, p.client
}

// pki is a CA and a server certificate, as TLS configs and as PEM.
type pki struct {
	server, client         *tls.Config
	caPEM, certPEM, keyPEM []byte
}

func newPKI(t testing.TB) pki {
	t.Helper()
	p := testpki.New(t, "dlflight")
	return pki{server: p.Server, client: p.Client, caPEM: p.CAPEM, certPEM: p.CertPEM, keyPEM: p.KeyPEM}
}
