package dlgrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults of the options that both services share. A limit left zero
// takes its default; every default is finite.
const (
	// DefaultMaxTensorBytes bounds the tensor bytes one call receives
	// from its peer: 4 GiB.
	DefaultMaxTensorBytes = 4 << 30
	// DefaultMaxConcurrentCalls bounds the calls a server runs at once.
	DefaultMaxConcurrentCalls = 64
	// DefaultStallTimeout is how long a call may go without progress.
	DefaultStallTimeout = time.Minute
	// DefaultHandshakeTimeout is how long a new connection may take to
	// finish its TLS handshake and HTTP/2 preface.
	DefaultHandshakeTimeout = 10 * time.Second
)

// ServerOptions are the options every tensor service's server has
// (dlflight.Options and dloip.Options carry each of them under the same
// name and type, and document them here). The zero ServerOptions serve
// plaintext to anyone, which suits only tests on loopback, with every
// limit at its default: a peer may be refused, but nothing it sends can
// end the process.
type ServerOptions struct {
	// TLS, when set, is the server's TLS configuration (certificates,
	// client authentication: mutual TLS with ClientAuth and ClientCAs).
	TLS *tls.Config
	// Tokens maps each accepted bearer token to the principal it
	// authenticates. When set, every call needs the gRPC metadata
	// "authorization: Bearer <token>" (the scheme in any case); a
	// missing or unknown token gets codes.Unauthenticated. Tokens are
	// compared in constant time. It is the simple case of Authenticate,
	// which replaces it when set.
	Tokens map[string]string
	// Authenticate, when set, decides who makes each call: from the
	// call's bearer token, peer address and verified client certificate
	// (AuthRequest) it returns the principal that Allow sees, or an
	// error: codes.Unauthenticated with the error's text, or the error's
	// own gRPC status if it has one. It runs on every call, on the
	// call's goroutine, before anything of the call is read; expiring or
	// signed tokens and certificate subjects plug in here. A panic in it
	// fails that call with codes.Internal and is reported to Logger.
	Authenticate func(ctx context.Context, req AuthRequest) (principal string, err error)
	// Allow, when set, decides per principal ("" without Tokens or
	// Authenticate), operation and name whether a call may go on; a
	// refusal gets codes.PermissionDenied. The names and operations of
	// each service are listed with Op. A panic in it fails that call
	// with codes.Internal and is reported to Logger.
	Allow func(principal string, op Op, name string) bool
	// Logger receives what the server recovered from: a panic in a hook
	// or a model (with its stack), a release callback that panicked.
	// slog.Default() when nil.
	Logger *slog.Logger
	// MaxMessageBytes bounds every gRPC message either way (the
	// service's DefaultMaxMessageBytes when zero); a larger one gets
	// codes.ResourceExhausted.
	MaxMessageBytes int
	// MaxTensorBytes bounds the tensor bytes one call receives: the
	// inputs of one inference request, shared-memory ones included, or
	// one DoPut stream (DefaultMaxTensorBytes when zero). Every size a
	// peer declares is checked against it, and against what its message
	// carries, before anything is allocated or mapped; beyond it a call
	// gets codes.ResourceExhausted.
	MaxTensorBytes int64
	// MaxConcurrentCalls bounds the calls the server runs at once, over
	// all connections (DefaultMaxConcurrentCalls when zero); a call
	// beyond it is refused at once with codes.ResourceExhausted, before
	// any of its bytes are read. With MaxMessageBytes it bounds what
	// peers can make the server buffer.
	MaxConcurrentCalls int
	// StallTimeout bounds how long a call that sends to its peer may go
	// without progress while the peer does not read (DefaultStallTimeout
	// when zero; negative: no bound): the peer's connection is then
	// closed, and what the call held is released.
	StallTimeout time.Duration
	// HandshakeTimeout bounds how long a new connection may take to
	// complete its TLS handshake and HTTP/2 preface before the server
	// closes it (DefaultHandshakeTimeout when zero).
	HandshakeTimeout time.Duration
	// Transport sizes gRPC's flow-control windows and socket buffers.
	Transport Transport
	// Allocator allocates the bodies of received tensors (64-byte
	// aligned); when nil, DefaultAllocator.
	Allocator Allocator
}

// ClientOptions are the options every tensor service's client has
// (dlflight.ClientOptions and dloip.ClientOptions carry each of them
// under the same name and type, and document them here). The zero
// ClientOptions dial plaintext with every limit at its default: a
// server may fail a call, but nothing it sends can end the process.
type ClientOptions struct {
	// TLS, when set, is the client's TLS configuration (the roots that
	// verify the server, a client certificate for mutual TLS); nil
	// dials plaintext.
	TLS *tls.Config
	// Token, when set, is sent with every call as the gRPC metadata
	// "authorization: Bearer <Token>", to the address dialled and
	// nowhere else.
	Token string
	// Headers are sent with every call as gRPC metadata (keys in lower
	// case, as HTTP/2 requires).
	Headers map[string]string
	// Logger receives what the client recovered from (a release
	// callback that panicked). slog.Default() when nil.
	Logger *slog.Logger
	// MaxMessageBytes bounds every message either way (the service's
	// DefaultMaxMessageBytes when zero).
	MaxMessageBytes int
	// MaxTensorBytes bounds the tensor bytes one call receives
	// (DefaultMaxTensorBytes when zero; negative: no bound): every size
	// a response declares is checked against it, and against what the
	// message carries, before anything is allocated; beyond it the call
	// fails with an error wrapping ErrLimit, and what arrived is
	// released.
	MaxTensorBytes int64
	// Transport sizes gRPC's flow-control windows and socket buffers.
	Transport Transport
	// Allocator allocates the bodies of received tensors (64-byte
	// aligned); when nil, DefaultAllocator.
	Allocator Allocator
}

// Op is what a call asks to do with a name, as ServerOptions.Allow sees
// it.
type Op int

const (
	// OpRead describes or fetches a tensor or a model: Flight's
	// ListFlights (names not allowed are left out), GetFlightInfo,
	// GetSchema and DoGet, with the tensor's name; the inference
	// protocol's ModelReady and ModelMetadata, with the model's.
	OpRead Op = iota
	// OpWrite stores a tensor: Flight's DoPut, with its name.
	OpWrite
	// OpInfer runs a model: the inference protocol's ModelInfer and
	// ModelStreamInfer, with the model's name.
	OpInfer
	// OpSharedMemory registers, lists, unregisters or uses a
	// shared-memory region (the inference protocol's system
	// shared-memory extension), with the region's name.
	OpSharedMemory
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpInfer:
		return "infer"
	case OpSharedMemory:
		return "use shared memory"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// AuthRequest is what an Authenticate hook sees of a call.
type AuthRequest struct {
	// Method is the call's full gRPC method name
	// ("/inference.GRPCInferenceService/ModelInfer").
	Method string
	// Token is the bearer token of the "authorization" metadata ("" when
	// the call carries none).
	Token string
	// Addr is the peer's network address.
	Addr net.Addr
	// Certificate is the client certificate that TLS verified against
	// the server's tls.Config (ClientAuth VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert, ClientCAs); nil when the peer showed
	// none, the server serves plaintext, or the config did not verify it.
	Certificate *x509.Certificate
	// Chains are the verified chains of Certificate, leaf first.
	Chains [][]*x509.Certificate
}
