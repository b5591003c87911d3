// Package dloip speaks the Open Inference Protocol (the KServe v2
// inference protocol) over gRPC and over its HTTP/REST binding, client
// and server, with tensors as DLPack producers and the tensor bytes
// never copied by us: a Go service calls NVIDIA Triton, KServe, Seldon
// MLServer or OpenVINO Model Server, or serves Go models to any of their
// clients (tritonclient, kserve's InferenceGRPCClient and
// InferenceRESTClient, curl).
//
//   - Into a tensor: Client.Infer and RESTClient.Infer (their outputs),
//     ModelFunc (a model's inputs, Request.Inputs).
//   - Out of a tensor: Client.Infer and RESTClient.Infer (their inputs),
//     Output (a model's outputs).
//   - Copies: the wire (gRPC, HTTP); typed contents and JSON values
//     decoded once.
//
// It is a module of its own (github.com/godlpack/dlpack/dloip), so that a
// user of the core never downloads gRPC.
//
// # The wire
//
// The service is inference.GRPCInferenceService as the protocol defines
// it (internal/pb/oip.proto, checked field by field against kserve's and
// tritonclient's own definitions by make oip): ServerLive, ServerReady,
// ModelReady, ServerMetadata, ModelMetadata and ModelInfer, and Triton's
// ModelStreamInfer (see Streaming). A tensor
// travels as raw contents (raw_input_contents, raw_output_contents): one
// flat row-major little-endian blob per tensor, in the order of the
// tensors. Datatypes: BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32,
// FP64, mapped both ways to DLPack element types (ParseDatatype,
// DatatypeOf), and BYTES, a tensor of byte strings (prompts, tokenizer
// input, labels, JSON: what Triton's LLMs take and return), which has no
// DLPack element type: a BytesTensor sends one (its elements laid out
// once, each a 4-byte little-endian length then its bytes), and a
// received BYTES Tensor gives its Elements, each a view of the received
// bytes (or of the bytes_contents protobuf decoded); every length is
// checked against what the message holds before anything is allocated
// for it, the element count first. Rank 0 and zero-size tensors travel
// as any other.
// Received typed contents (InferTensorContents, which some peers send)
// are decoded into a buffer of their own (Tensor.IsCopied); FP16 and
// BF16, which have no typed list, must come raw.
//
// # Copies
//
// Sending (Client.Infer's inputs, a Server's outputs), each tensor is
// taken with dlpack.From and its bytes are handed to gRPC as they are by
// the codec, holding the tensor until gRPC has written them: the one copy
// is gRPC's writer filling the socket's buffer; protobuf never copies the
// bytes into a message. A tensor that is not compact row-major (strided,
// transposed, broadcast) is made compact once, by a copy, first. A
// tensor in a file mapping (a tensorfile tensor, recognised by its Mapped
// method, or a shared-memory input handed on) is the exception: another
// process may cut the file short, and a read of a lost page faults
// (SIGBUS), which would kill the process in gRPC's writer goroutine. Its
// bytes are therefore copied into the message by the codec, on the
// calling goroutine, under a fault guard: a truncated file fails the call
// with an error wrapping ErrTruncated (a server answers codes.Internal).
// Receiving, gRPC reads the socket into its frame buffers; the codec then
// copies each tensor's bytes once from those frames into a 64-byte
// aligned buffer, and the Tensor shares that buffer (protobuf-go would
// first gather the frames into one buffer and then copy each field again,
// to an address of no particular alignment). A tensor of 1 MiB or more
// reuses a buffer that an earlier one of its size class left when it and
// all its exports were released: fresh memory would be zeroed and faulted
// in page by page during the copy, which costs more than the copy. A
// Tensor's Bytes are therefore valid only until it is released (an
// export holds its own reference). A Tensor is a dlpack.Source
// and a dlpack.Producer, so NumPy, JAX, ONNX Runtime or gonum take it
// without another copy.
//
// # Shared memory
//
// The Server implements Triton's system shared-memory extension
// (SystemSharedMemoryRegister, Status, Unregister; tritonclient's
// tritonclient.utils.shared_memory makes such regions), and the Client
// uses it (RegisterSystemSharedMemory, Input.Region,
// RequestedOutput.Region): a client on the same host names a region, an
// offset and a byte size instead of sending a tensor's bytes. From Go, a
// Region does it in a few calls: CreateRegion creates, sizes and maps
// one, Region.Tensor views a tensor in it, Client.RegisterRegion
// registers it, and from then on an Input whose tensor lies in it goes
// by reference (its region, offset and byte size; none of its bytes on
// the wire), found by its address; Region.Close removes the object, the
// mapping going with the last tensor of it. The server
// maps each registered span of the POSIX shared-memory object (a file
// under /dev/shm, such as one tensorfile.CreateNPY made) once, checking
// that the object holds it. A key names a file directly in /dev/shm (one
// name: no "/", "." or ".."), opened without following a symbolic link
// and without blocking on a FIFO; it must be a regular file, owned by
// the server's own user and writable by no one else, which is checked on
// the opened file (codes.InvalidArgument otherwise). A region belongs
// to the principal that registered it: only that principal may use,
// list or unregister it. An input in shared memory is the region's
// memory itself, read-only, with no copy; an output asked for in shared
// memory is written into the region, one copy from the model's output
// (the response then carries an empty raw entry for it, as Triton's
// does, and the output's region parameters). The client fails an Infer
// whose response does not say that an output it asked for in a region
// was written there (an empty raw entry, as Triton answers, or the
// region parameter): a server without the extension (kserve, MLServer)
// answers OK and leaves the region as it was, which must not pass for
// the output (ErrInvalid, naming it). Every use is bounds-checked against the region
// (codes.InvalidArgument); a region that a running request or a tensor a
// model kept still uses cannot be unregistered (codes.FailedPrecondition)
// and is unmapped only when the last use ends. Values a peer placed off a
// 64-byte boundary are never shared by chance: Tensor.DescribeTensor
// refuses them (dlpack.ErrAlignment) and Tensor.DLPack copies them,
// flagged dlpack.FlagIsCopied. An object another process cuts short after
// it was registered fails the server's write of an output into it
// (codes.Internal naming ErrTruncated) instead of killing the server; a
// model that reads an input from such an object faults like any reader of
// a truncated mapping.
//
// # Security and limits
//
// The network edge is the shared gRPC layer's (package dlgrpc, which
// dlflight uses too): the options both services share have the same
// names and are documented once, on dlgrpc.ServerOptions and
// dlgrpc.ClientOptions, and every limit has a finite default, so that
// the zero Options may refuse a peer but nothing a peer sends ends the
// process.
//
// Options.TLS serves over TLS; Options.Tokens requires a bearer token in
// the "authorization" metadata (codes.Unauthenticated without one), or
// Options.Authenticate decides from the token, the peer's address and
// its verified client certificate (dlgrpc.AuthRequest); either runs
// when a call's headers arrive, before any of its messages is read.
// Options.Allow is the policy (codes.PermissionDenied): dlgrpc.OpRead
// for ModelReady and ModelMetadata, dlgrpc.OpInfer for ModelInfer and
// for each request of a stream, with the model's name, and
// dlgrpc.OpSharedMemory with a region's. A panic
// in a hook, a model or an output's Release fails that call alone with
// codes.Internal and is reported to Options.Logger; the server serves
// on.
//
// Options.MaxMessageBytes bounds messages either way (128 MiB by
// default), Options.MaxTensorBytes the input bytes of one request,
// shared-memory ones included (4 GiB), MaxConcurrentCalls the calls
// running at once (64) and MaxRegions the registered regions (1,024):
// beyond any, codes.ResourceExhausted. Every size a request declares is
// checked against those bounds and against what the message carries
// before anything is allocated: a shape of a billion elements with no
// contents gets codes.InvalidArgument, not an allocation. A client has
// TLS, a bearer token, arbitrary request headers and its own limits
// (ClientOptions): a response whose outputs declare more than
// ClientOptions.MaxTensorBytes (4 GiB by default) fails with an error
// wrapping ErrLimit before anything is allocated for it.
//
// A request that breaks the protocol gets codes.InvalidArgument with a
// message naming the input and the value, and the server serves on: a
// byte length that is not the shape times the element size, a count of
// typed values that is not the shape's, a negative or overflowing
// dimension, an unknown datatype or BYTES, typed and raw contents for
// one input, raw contents for only some inputs, a missing, extra or
// duplicated input name, a datatype or shape the model's metadata does
// not take, an output the model lacks, a message that breaks protobuf's
// wire format (dlgrpc.ErrMalformed). An unknown model or version gets
// codes.NotFound. The client checks responses the same way (errors
// wrapping ErrInvalid, ErrDatatype, ErrShape, dlgrpc.ErrMalformed). A
// client that hangs up mid-request leaves nothing held.
//
// # Streaming
//
// The Server implements Triton's streaming inference (ModelStreamInfer,
// which tritonclient's start_stream and async_stream_infer call): a
// client sends any number of requests on one stream, and each is
// answered by one response or, from a StreamModel (Triton's decoupled
// models, an LLM that streams its tokens; RegisterStream, StreamFunc),
// by any number of them. Every response carries the parameter
// "triton_final_response" (ParamFinal), true on its request's last; a
// StreamModel that ends a request without a response of its own sends
// an empty final response only when the request sets
// "triton_enable_empty_final_response" (ParamEmptyFinal), as Triton
// does. A Model on a stream answers one response, final, and requests
// to Models are answered in the order they came, as Triton answers
// them; a StreamModel's responses go as they are made. A ModelInfer of
// a StreamModel is refused with codes.Unimplemented, in Triton's words.
//
// The requests of a stream run as they arrive, at most
// Options.MaxStreamRequests at once (8 by default): the first in the
// stream's own place among MaxConcurrentCalls, each other one in a place
// it takes while it runs, so that MaxConcurrentCalls bounds every
// request running, and what the server holds for its peers stays
// bounded as for ModelInfer. A stream with no room left is read no
// further until one of its requests ends: its client's sends block;
// nothing is refused. Responses go out one at a time, each from the
// model's memory as ModelInfer's do (the raw contents inside the
// ModelInferResponse that a stream's response wraps are written by the
// shared layer too: dlgrpc.Writer.Nested). A model's send blocks while
// the client does not read, so a slow reader slows the model down and
// the server buffers no more than gRPC's flow-control window; a reader
// that stops is cut after Options.StallTimeout, and what the model sent
// is released. Time a stream spends idle (waiting for its client's next
// request or a model's next response) is not a stall. A request that
// fails (an unknown model, an input the model does not take, the
// model's error or panic, an output that breaks the metadata) is
// answered with its error (the response's error_message, with the
// request's id) and the stream goes on; a message that breaks the
// protocol's wire format or a limit ends the stream with its status.
// Shutdown answers a request that comes on a stream once it has begun
// with codes.Unavailable, lets the running ones finish, and then ends
// the streams still open with codes.Unavailable, each after the
// responses it sent (gRPC sends them before the status). An output asked for in a shared-memory region
// is written there for each response, as for ModelInfer.
//
// Client.InferStream opens a Stream (Send, Recv, CloseSend, Close), on
// which requests are sent while responses are received; Client.Responses
// sends one request on a stream of its own and iterates over its
// responses up to the final one. Every response is decoded as Infer's
// (each size it declares checked against what it carries and against
// ClientOptions.MaxTensorBytes before anything is allocated), and
// InferResponse.Final says which is a request's last. A request the
// server answered with an error comes as a *ResponseError (wrapping
// ErrResponse) naming the request, and the stream goes on; a response
// that breaks the protocol ends the stream. Once Close is called or the
// context ends, Recv hands over nothing more, and what gRPC had received
// is dropped. The client asks for no output in shared memory on a
// stream: a stream's responses do not say which region each was written
// to.
//
// # REST
//
// The same Server serves the protocol's REST binding (KServe v2's
// HTTP/REST API) on the same models: ServeREST on a listener of its own
// (HTTPS with Options.TLS), or HTTPHandler in a server of the caller's.
// DialREST makes a RESTClient, with the methods and types of Client.
// A tensor travels as JSON values ("data", in row-major order, flat or
// nested) or, with Triton's binary-data extension, as binary data after
// the JSON (HeaderInferenceContentLength, ParamBinaryDataSize), laid out
// as gRPC's raw contents. Binary data is read straight into a 64-byte
// aligned buffer of the Allocator that the received Tensor shares, and
// written from the producer's own memory; JSON values are read straight
// into the tensor's buffer and written from its bytes a piece at a time,
// never held as one document. A RESTClient sends and asks for binary
// data by default (WithJSON for servers without the extension, such as
// MLServer); a Server answers JSON unless the request asks for binary
// data (an output's "binary_data" parameter, or the request's
// "binary_data_output").
//
// JSON numbers: an integer type takes integer literals in its range,
// BOOL true and false, FP16, BF16, FP32 and FP64 any number (read as a
// float64, then rounded to the type, ties to even, as NumPy does) and
// NaN, Infinity and -Infinity. A float is written so that it reads back
// as the same bits, whether read as a float64 and rounded (Python,
// orjson, NumPy) or read straight to its type; NaN and the infinities
// as NaN, Infinity and -Infinity (a NaN's payload is lost: binary data
// keeps it), a negative zero as -0.0. BYTES are JSON strings, their
// UTF-8 bytes the elements; a BYTES output that is not UTF-8 text has no
// JSON string, and fails its request (ErrInvalid, 400) naming the
// element: it must be asked for as binary data.
//
// The edge is the gRPC service's: each request is admitted as a call is
// (dlgrpc.Server.AdmitHTTP: Tokens or Authenticate from the
// Authorization header, the same MaxConcurrentCalls places), the same
// Allow decides, and the model sees the request's headers as a call's
// metadata (metadata.FromIncomingContext). Options.MaxMessageBytes bounds
// a REST body either way and MaxTensorBytes the tensors; every length a
// message declares (its Content-Length, the JSON's length, each binary
// data size, each shape) is checked against those bounds and against the
// body before anything is allocated for it, and a tensor's JSON values
// are counted against the shape from the size of their JSON first. An
// error is answered {"error": "..."} with the HTTP status of its gRPC
// code (RESTError reads it back as that code). Triton's shared-memory
// parameters and compressed bodies are not served over REST.
//
// # Models
//
// A Model gives its metadata (ModelMetadata: inputs and outputs with
// name, datatype and shape, -1 for a dimension of variable size, []int64{}
// for a scalar) and runs a Request, whose inputs have already been
// checked against that metadata, into Outputs of any dlpack.Producer (a
// BytesTensor for BYTES). ModelFunc makes one of a plain Go function. A
// model may take what it is sent: an input may be Optional, a datatype
// left to the request (""), and a Dynamic model sees every input the
// request carries, listed or not, with its name, datatype and shape, and
// returns any outputs. What the metadata says goes on the wire as the
// protocol means it; a tensor of any rank cannot be said there, so
// Register refuses a nil shape, and a Dynamic model leaves such tensors
// out of its metadata.
//
// ModelReady and ModelMetadata of an unknown model or version answer
// codes.NotFound, as kserve does; Client.ModelReady then returns false
// with that error.
package dloip
