package dlflight

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/godlpack/dlpack/dlgrpc"
)

// DefaultMaxMessageBytes is the message limit when Options and
// ClientOptions leave it zero: a tensor larger than this travels as
// several batches, split along its first dimension.
const DefaultMaxMessageBytes = 16 << 20

// DefaultMaxTensors is Options.MaxTensors when zero.
const DefaultMaxTensors = 1024

// DefaultMaxStoredBytes is Options.MaxStoredBytes when zero: 4 GiB.
const DefaultMaxStoredBytes = 4 << 30

// DefaultRangeStallTimeout is ClientOptions.StallTimeout when zero.
const DefaultRangeStallTimeout = 10 * time.Second

// Options configure a Server. The options from TLS to Allocator are
// those every tensor service shares, under the same names as
// dloip.Options: dlgrpc.ServerOptions documents each one and its
// default. The zero Options serve plaintext to anyone, which suits only
// tests on loopback, with every limit at its default: a peer may be
// refused, but nothing it sends can end the process.
//
// For Flight, MaxTensorBytes bounds the bytes (message bodies and
// headers) of one DoPut stream, and StallTimeout both the DoGet whose
// reader stops reading and the parallel Put left incomplete. Allow sees
// dlgrpc.OpRead (ListFlights, GetFlightInfo, GetSchema, DoGet) and
// dlgrpc.OpWrite (DoPut) with the tensor's name.
type Options struct {
	// MaxTensors bounds how many tensors the server holds
	// (DefaultMaxTensors when zero); a DoPut of a new name beyond it
	// gets codes.ResourceExhausted. Register is not bounded: it is the
	// program's own decision.
	MaxTensors int
	// MaxStoredBytes bounds the bytes of what peers' DoPuts make the
	// server hold at once: the tensors they stored, those being
	// received and the incomplete parallel Puts
	// (DefaultMaxStoredBytes when zero). A DoPut beyond it gets
	// codes.ResourceExhausted; Register is not bounded.
	MaxStoredBytes int64
	// EndpointBytes: a tensor larger than this is described by
	// GetFlightInfo as several endpoints of about this many bytes each,
	// each a ticket for a range of rows of its first dimension
	// (RangeTicket), so that a client fetches them on parallel streams
	// (Client.Get does); DoGet of the name still streams the whole
	// tensor. DefaultEndpointBytes when zero; negative: one endpoint.
	EndpointBytes int64

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

// ClientOptions configure a Client. The options from TLS to Allocator
// are those every tensor service's client shares, under the same names
// as dloip.ClientOptions: dlgrpc.ClientOptions documents each one and
// its default. For Flight, MaxTensorBytes bounds the bytes (message
// bodies and headers) one Get receives: a server that sends more, such
// as one that streams rows without end under a schema that does not
// give the tensor's shape, fails the Get with an error wrapping
// ErrLimit, and what arrived is released.
type ClientOptions struct {
	// Streams is how many endpoints of one tensor Get fetches at once,
	// each on its own stream (DefaultStreams when zero), and how many
	// ranges Put sends at once.
	Streams int
	// PutRangeBytes, when positive, makes Put send a tensor larger than
	// this as ranges of rows of about this many bytes, on up to Streams
	// DoPuts at once, which a dlflight Server assembles in one buffer and
	// stores once every range has arrived. Zero: one stream, which any
	// Flight server takes (the ranges are a dlflight protocol).
	PutRangeBytes int64
	// StallTimeout bounds how long a stream of Get may go without a
	// message arriving (DefaultRangeStallTimeout when zero; negative: no
	// bound): a range whose server is alive but silent is then fetched
	// from its next location (a replica), while the caller's deadline
	// still has time; a stream with no replica left fails the Get with
	// an error wrapping ErrStalled.
	StallTimeout time.Duration
	// TrustLocation decides which other servers Get may fetch rows from
	// when a FlightInfo names them. Get dials a location it follows with
	// these options, Token included, so this is what keeps the token from
	// going wherever a server's answer points. It is called with the
	// location's "host:port" and whether it speaks TLS; a location it
	// refuses is not dialled, and counts as a failed replica, with an
	// error wrapping ErrLocation. When nil, only a location at the
	// address this client was dialled with (the same host and port, as
	// written) is followed: another port of the same host is another
	// service, and gets no token unless TrustLocation says so.
	TrustLocation func(addr string, tls bool) bool

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
