package dlflight

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/internal/testpki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// An Authenticate hook takes expiring tokens: a fresh one authenticates
// as its principal (which Allow sees), an expired or malformed one gets
// codes.Unauthenticated with the hook's message, and a hook's own gRPC
// status is kept.
func TestAuthenticateHook(t *testing.T) {
	now := time.Now()
	auth := func(_ context.Context, r dlgrpc.AuthRequest) (string, error) {
		// "<principal>.<unix expiry>"
		who, exp, ok := strings.Cut(r.Token, ".")
		if !ok {
			return "", errors.New("malformed token")
		}
		if who == "mallory" {
			return "", status.Error(codes.PermissionDenied, "mallory is banned")
		}
		sec, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Unix(sec, 0).Before(now) {
			return "", fmt.Errorf("token of %s expired", who)
		}
		if r.Addr == nil {
			return "", errors.New("no peer address")
		}
		return who, nil
	}
	var seen []string
	s, addr := serve(t, Options{Authenticate: auth, Tokens: map[string]string{"static": "ignored"},
		Allow: func(p string, _ dlgrpc.Op, _ string) bool { seen = append(seen, p); return p == "alice" }})
	if err := s.Register("x", newRaw(t, dlpack.Int8, 3)); err != nil {
		t.Fatal(err)
	}
	fresh := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	stale := strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)
	got, err := dial(t, addr, ClientOptions{Token: "alice." + fresh}).Get(ctxT(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	_, err = dial(t, addr, ClientOptions{Token: "bob." + fresh}).Get(ctxT(t), "x")
	wantCode(t, err, codes.PermissionDenied)
	_, err = dial(t, addr, ClientOptions{Token: "alice." + stale}).Get(ctxT(t), "x")
	wantCode(t, err, codes.Unauthenticated)
	if !strings.Contains(err.Error(), "token of alice expired") {
		t.Fatalf("the hook's message is lost: %v", err)
	}
	_, err = dial(t, addr, ClientOptions{Token: "static"}).Get(ctxT(t), "x")
	wantCode(t, err, codes.Unauthenticated)
	_, err = dial(t, addr, ClientOptions{Token: "mallory." + fresh}).Info(ctxT(t), "x")
	wantCode(t, err, codes.PermissionDenied)
	slices.Sort(seen)
	if strings.Join(slices.Compact(seen), ",") != "alice,bob" {
		t.Fatalf("Allow saw principals %v", seen)
	}
}

// Mutual TLS end to end: the server verifies client certificates against
// its CA and the Authenticate hook takes the principal from the verified
// certificate's subject; a certificate of another CA, or none, does not
// get through the handshake.
func TestMutualTLS(t *testing.T) {
	auth := testpki.NewCA(t, "dlflight mTLS")
	serverTLS := &tls.Config{Certificates: []tls.Certificate{auth.Issue(t, "server", true)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: auth.Pool, MinVersion: tls.VersionTLS13}
	s, addr := serve(t, Options{TLS: serverTLS,
		Authenticate: func(_ context.Context, r dlgrpc.AuthRequest) (string, error) {
			if r.Certificate == nil {
				return "", errors.New("no verified client certificate")
			}
			return "cn:" + r.Certificate.Subject.CommonName, nil
		},
		Allow: func(p string, op dlgrpc.Op, _ string) bool {
			return p == "cn:alice" || (p == "cn:bob" && op == dlgrpc.OpRead)
		}})
	src := newRaw(t, dlpack.Float32, 16, 16)
	if err := s.Register("w", src); err != nil {
		t.Fatal(err)
	}
	client := func(cert ...tls.Certificate) ClientOptions {
		return ClientOptions{TLS: &tls.Config{RootCAs: auth.Pool, Certificates: cert, MinVersion: tls.VersionTLS13}}
	}
	alice := dial(t, addr, client(auth.Issue(t, "alice", false)))
	if err := alice.Put(ctxT(t), "w2", src); err != nil {
		t.Fatal(err)
	}
	got, err := alice.Get(ctxT(t), "w2")
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, got, src)
	got.Close()
	bob := dial(t, addr, client(auth.Issue(t, "bob", false)))
	got, err = bob.Get(ctxT(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	err = bob.Put(ctxT(t), "w3", src)
	wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(err.Error(), `"cn:bob"`) {
		t.Fatalf("the refusal does not name the principal: %v", err)
	}
	other := testpki.NewCA(t, "dlflight mTLS")
	_, err = dial(t, addr, client(other.Issue(t, "alice", false))).Get(ctxT(t), "w")
	wantCode(t, err, codes.Unavailable)
	_, err = dial(t, addr, client()).Get(ctxT(t), "w")
	wantCode(t, err, codes.Unavailable)
}

// stallingGet opens a DoGet of name on a connection whose receive window
// is gRPC's minimum, reads one message and then stops reading without
// cancelling: the server's sends stall. It returns the stream.
func stallingGet(t testing.TB, addr, name string) flight.FlightService_DoGetClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(64<<10), grpc.WithStaticConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(dlgrpc.Codec()), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := flight.NewFlightServiceClient(conn).DoGet(context.Background(), &flight.Ticket{Ticket: []byte(name)})
	if err != nil {
		t.Fatal(err)
	}
	f := &inFrame{alloc: dlgrpc.DefaultAllocator}
	if err := stream.RecvMsg(f); err != nil {
		t.Fatal(err)
	}
	if f.body != nil {
		f.body.Release()
	}
	return stream
}

// A reader that stops reading without cancelling loses its stream after
// StallTimeout, and the tensor it held, unregistered meanwhile, is
// released then, with no garbage collection by the program.
func TestStallTimeout(t *testing.T) {
	const stall = 300 * time.Millisecond
	s, addr := serve(t, Options{StallTimeout: stall, MaxMessageBytes: 1 << 20})
	src := newRaw(t, dlpack.Float32, 1024, 1024) // 4 MiB: 4 messages of 1 MiB
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	stream := stallingGet(t, addr, "big")
	start := time.Now()
	s.Unregister("big")
	for src.released.Load() == 0 {
		if time.Since(start) > 20*stall+10*time.Second {
			t.Fatalf("the stalled reader still holds the tensor after %v", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("released %v after the reader stalled (StallTimeout %v)", time.Since(start).Round(time.Millisecond), stall)
	var err error
	for err == nil {
		f := &inFrame{alloc: dlgrpc.DefaultAllocator}
		err = stream.RecvMsg(f)
		if f.body != nil {
			f.body.Release()
		}
	}
	if errors.Is(err, io.EOF) {
		t.Fatal("the stalled stream ended as if complete")
	}
	wantCode(t, err, codes.Unavailable)
	if src.released.Load() != 1 {
		t.Fatalf("released %d times", src.released.Load())
	}
	// the server goes on serving
	if err := s.Register("small", newRaw(t, dlpack.Int8, 4)); err != nil {
		t.Fatal(err)
	}
	got, err := dial(t, addr, ClientOptions{}).Get(ctxT(t), "small")
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
}

// A peer that connects and sends nothing is disconnected after
// HandshakeTimeout.
func TestHandshakeTimeout(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		opts := Options{HandshakeTimeout: 200 * time.Millisecond}
		if tlsOn {
			opts.TLS, _ = testPKI(t)
		}
		_, addr := serve(t, opts)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetReadDeadline(start.Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c)
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("tls %v: the silent connection is still open after %v", tlsOn, time.Since(start))
		}
		t.Logf("tls %v: closed after %v", tlsOn, time.Since(start).Round(time.Millisecond))
	}
}

// Shutdown releases every held tensor before it returns, a tensor a
// stalled DoGet is sending too, with no garbage collection by the
// program.
func TestShutdownReleases(t *testing.T) {
	// with and without the stall watch, which must not keep what gRPC
	// dropped reachable
	for _, stall := range []time.Duration{-1, 0} {
		shutdownReleases(t, stall)
	}
}

func shutdownReleases(t *testing.T, stall time.Duration) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{StallTimeout: stall, MaxMessageBytes: 1 << 20})
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	src := newRaw(t, dlpack.Float32, 1024, 1024)
	idle := newRaw(t, dlpack.Int8, 8)
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	if err := s.Register("idle", idle); err != nil {
		t.Fatal(err)
	}
	stallingGet(t, lis.Addr().String(), "big")
	s.Shutdown()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if src.released.Load() != 1 || idle.released.Load() != 1 {
		t.Fatalf("after Shutdown: released %d and %d times, want 1 and 1", src.released.Load(), idle.released.Load())
	}
}

// throttle is a TCP proxy to addr that passes the server's bytes on at
// rate bytes per tick; it returns its address.
func throttle(t *testing.T, addr string, rate int, tick time.Duration) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			if tc, ok := out.(*net.TCPConn); ok {
				tc.SetReadBuffer(rate) // the server meets the slow link soon
			}
			go func() { io.Copy(out, in); out.Close() }()
			go func() {
				defer in.Close()
				buf := make([]byte, rate)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						if _, err := in.Write(buf[:n]); err != nil {
							return
						}
						time.Sleep(tick)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return lis.Addr().String()
}

// A slow link is not a stall: a message that takes longer than
// StallTimeout to drain, while the socket keeps taking bytes, arrives.
func TestSlowReaderNotStalled(t *testing.T) {
	const stall = 400 * time.Millisecond
	s, addr := serve(t, Options{StallTimeout: stall, MaxMessageBytes: 2<<20 + batchOverhead})
	src := newRaw(t, dlpack.Float32, 1024, 1024) // 4 MiB: 2 messages of 2 MiB
	if err := s.Register("big", src); err != nil {
		t.Fatal(err)
	}
	// 64 KiB every 25 ms: 2.6 MB/s, a message in about 0.8 s
	c := dial(t, throttle(t, addr, 64<<10, 25*time.Millisecond), ClientOptions{MaxMessageBytes: 2<<20 + batchOverhead})
	start := time.Now()
	got, err := c.Get(ctxT(t), "big")
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	sameTensor(t, got, src)
	got.Close()
	t.Logf("4 MiB in %v over the slow link (StallTimeout %v)", time.Since(start).Round(time.Millisecond), stall)
}
