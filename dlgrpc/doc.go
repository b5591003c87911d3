// Package dlgrpc is the gRPC layer under the library's tensor services,
// dlflight (Arrow Flight) and dloip (the Open Inference Protocol): one
// copy of what both need at the network edge, where any peer can send
// anything. A gRPC service of your own carries tensors the same way:
//
//   - Into a tensor: Decode (a message's tensor fields, each a Tensor).
//   - Out of a tensor: Writer.Tensor (a tensor's bytes into a message,
//     handed to gRPC from their own memory).
//   - Copies: the wire (gRPC).
//
// What it holds:
//
//   - The options both services share (ServerOptions, ClientOptions):
//     dlflight.Options and dloip.Options, and their ClientOptions, carry
//     each under the same name and type; they are documented here, once,
//     with their defaults. Every limit has a finite default.
//   - The received Tensor and its reference count: a CPU tensor sharing
//     the 64-byte aligned buffer its bytes were copied into, once, out of
//     gRPC's frames; a dlpack.Source and a dlpack.Producer.
//   - The wire: sending, a tensor's bytes go to gRPC from the producer's
//     own memory, held (Hold) until gRPC has written them (Writer);
//     receiving, each tensor's bytes are copied once into aligned memory,
//     and every other field goes to protobuf (Decode), by protobuf's
//     exact rules, so that no message means one thing to a peer and
//     another here; the same for tensors in a message that another wraps
//     (Writer.Nested, DecodePath: an inference stream's responses).
//   - The server (Server): authentication (bearer tokens, an
//     Authenticate hook that sees the token, the peer address and the
//     verified client certificate) before any message of a call is read,
//     the Allow policy, MaxConcurrentCalls, the handshake and stall
//     timeouts, and recovery: a panic in a hook, a model or a release
//     callback fails that call alone with codes.Internal and is reported
//     to the Logger; the server serves on.
//   - The gRPC status of every error (Status).
//
// It is a module of its own (github.com/godlpack/dlpack/dlgrpc), so that
// dloip's module graph holds no Arrow and the core's no gRPC. A program
// uses it through dlflight or dloip, importing it for the types their
// options share (AuthRequest, Op, Transport, Allocator).
//
// # Safe by default
//
// Every size a peer declares (a shape, an element count, a byte length,
// a message, a shared-memory offset and size) is checked against a bound
// before anything is allocated or mapped: against what its message
// carries, MaxTensorBytes and MaxMessageBytes. With the zero options a
// peer may be refused; nothing it sends ends the process, and what one
// server holds for its peers at once is bounded by MaxConcurrentCalls
// times MaxMessageBytes (gRPC's buffers of the messages being received)
// plus what each service keeps (dlflight's stored tensors, dloip's
// registered regions), each under its own limit.
package dlgrpc
