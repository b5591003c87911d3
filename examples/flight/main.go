// Command flight serves Go tensors over Arrow Flight (package dlflight)
// to a Python client that uses nothing but pyarrow.flight and NumPy, over
// TLS with a bearer token: the client fetches a matrix, checks it against
// NumPy, computes, and puts its result back, which Go fetches and checks.
// The certificates are made here with Go's crypto; everything stays on
// 127.0.0.1. It ends with nothing outstanding:
//
//	make flight-example   # or: DLFLIGHT_PYTHON=.venv/bin/python go run ./examples/flight
//
// The interpreter is DLFLIGHT_PYTHON, else .venv/bin/python; it needs
// pyarrow and NumPy (examples/python/requirements.txt).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlflight"
	"github.com/godlpack/dlpack/dlgrpc"
)

// Two principals: the Python worker, and this program's own client.
const (
	token        = "worker-token"
	serviceToken = "service-token"
)

func main() {
	serverTLS, clientTLS, caPEM := certificates()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := dlflight.NewServer(dlflight.Options{
		TLS:    serverTLS,
		Tokens: map[string]string{token: "worker", serviceToken: "service"},
		// the worker reads "x" and writes "y", nothing else; the service
		// does anything
		Allow: func(who string, op dlgrpc.Op, name string) bool {
			return who == "service" || who == "worker" && (op == dlgrpc.OpRead && name == "x" || op == dlgrpc.OpWrite && name == "y")
		},
	})
	go func() {
		if err := s.Serve(lis); err != nil {
			log.Fatal(err)
		}
	}()

	// a 1000 x 64 float32 matrix, served from Go memory
	x := dlpack.AlignedSlice[float32](1000 * 64)
	for i := range x {
		x[i] = float32(i%97) * 0.5
	}
	if err := s.Register("x", dlpack.NewArray(x, []int64{1000, 64})); err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving x float32[1000 64] on", lis.Addr(), "(TLS, bearer token)")

	// the Python worker: pyarrow.flight fetches x, puts y = 2x + 1
	dir, err := os.MkdirTemp("", "dlflight-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		log.Fatal(err)
	}
	py := os.Getenv("DLFLIGHT_PYTHON")
	if py == "" {
		py = ".venv/bin/python"
	}
	if _, err := os.Stat(py); err != nil {
		log.Fatalf("no Python interpreter at %s (DLFLIGHT_PYTHON): run `make .venv/.installed` first, or set DLFLIGHT_PYTHON to a Python with pyarrow and NumPy", py)
	}
	_, here, _, _ := runtime.Caller(0)
	cmd := exec.Command(py, filepath.Join(filepath.Dir(here), "client.py"), lis.Addr().String(), ca, token)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("the Python client: %v", err)
	}

	// Go fetches y: no copy after gRPC hands the message over
	c, err := dlflight.Dial(lis.Addr().String(), dlflight.ClientOptions{TLS: clientTLS, Token: serviceToken})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	y, err := c.Get(ctx, "y")
	if err != nil {
		log.Fatal(err)
	}
	f, err := dlpack.From(y)
	if err != nil {
		log.Fatal(err)
	}
	ys, err := dlpack.Slice[float32](f)
	if err != nil {
		log.Fatal(err)
	}
	for i := range ys {
		if ys[i] != 2*x[i]+1 {
			log.Fatalf("y[%d] = %v, want %v", i, ys[i], 2*x[i]+1)
		}
	}
	fmt.Printf("Go fetched y %v%v from the server, 64-byte aligned: %v; y == 2x + 1\n", y.DataType(), y.Shape(), y.Aligned())
	f.Close()
	y.Close()
	c.Close()
	s.Shutdown()
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}

// certificates makes a CA and a certificate for 127.0.0.1 and localhost.
func certificates() (server, client *tls.Config, caPEM []byte) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		log.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
