package dloip

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/godlpack/dlpack/dlgrpc"
)

// DefaultMaxMessageBytes is the message limit when Options and
// ClientOptions leave it zero: 128 MiB, room for a 64 MiB tensor each way
// and more. The protocol sends a request or response as one message, so
// the limit bounds the tensors of one call.
const DefaultMaxMessageBytes = 128 << 20

// DefaultMaxRegions is Options.MaxRegions when zero.
const DefaultMaxRegions = 1024

// DefaultMaxStreamRequests is Options.MaxStreamRequests when zero.
const DefaultMaxStreamRequests = 8

// Options configure a Server. The options from TLS to Allocator are
// those every tensor service shares, under the same names as
// dlflight.Options: dlgrpc.ServerOptions documents each one and its
// default. The zero Options serve plaintext to anyone, which suits only
// tests on loopback, with every limit at its default: a peer may be
// refused, but nothing it sends can end the process.
type Options struct {
	// Name and Version are what ServerMetadata answers ("dloip" and ""
	// when empty).
	Name, Version string
	// MaxRegions bounds how many shared-memory regions the server holds
	// registered at once (DefaultMaxRegions when zero); a registration
	// beyond it gets codes.ResourceExhausted.
	MaxRegions int
	// MaxStreamRequests bounds the requests of one ModelStreamInfer
	// stream that run at once (DefaultMaxStreamRequests when zero). A
	// stream's first request runs in the stream's own place among
	// MaxConcurrentCalls; each one beyond it takes a place of its own
	// while it runs, as a call does, so that MaxConcurrentCalls bounds
	// every request running, streams' included. A stream with none free
	// reads its next request once one of its own has ended: it is slowed
	// down, never refused.
	MaxStreamRequests int

	TLS                *tls.Config
	Tokens             map[string]string
	Authenticate       func(ctx context.Context, req dlgrpc.AuthRequest) (principal string, err error)
	Allow              func(principal string, op dlgrpc.Op, name string) bool
	Logger             *slog.Logger
	MaxMessageBytes    int // DefaultMaxMessageBytes when zero
	MaxTensorBytes     int64
	MaxConcurrentCalls int
	StallTimeout       time.Duration
	HandshakeTimeout   time.Duration
	Transport          dlgrpc.Transport
	Allocator          dlgrpc.Allocator
}

func (o Options) shared() dlgrpc.ServerOptions {
	return dlgrpc.ServerOptions{TLS: o.TLS, Tokens: o.Tokens, Authenticate: o.Authenticate, Allow: o.Allow, Logger: o.Logger,
		MaxMessageBytes: o.MaxMessageBytes, MaxTensorBytes: o.MaxTensorBytes, MaxConcurrentCalls: o.MaxConcurrentCalls,
		StallTimeout: o.StallTimeout, HandshakeTimeout: o.HandshakeTimeout, Transport: o.Transport, Allocator: o.Allocator}
}

// ClientOptions configure a Client: those every tensor service's client
// shares, under the same names as dlflight.ClientOptions;
// dlgrpc.ClientOptions documents each one and its default.
type ClientOptions struct {
	TLS             *tls.Config
	Token           string
	Headers         map[string]string
	Logger          *slog.Logger
	MaxMessageBytes int // DefaultMaxMessageBytes when zero
	MaxTensorBytes  int64
	Transport       dlgrpc.Transport
	Allocator       dlgrpc.Allocator
}

func (o ClientOptions) shared() dlgrpc.ClientOptions {
	return dlgrpc.ClientOptions{TLS: o.TLS, Token: o.Token, Headers: o.Headers, Logger: o.Logger,
		MaxMessageBytes: o.MaxMessageBytes, MaxTensorBytes: o.MaxTensorBytes, Transport: o.Transport, Allocator: o.Allocator}
}
