// Package dlflight serves and fetches tensors over Arrow Flight (gRPC
// streams of Arrow record batches), so a Go service's tensors reach a
// model server on another machine or a Python worker on the same one with
// no format of its own and no copy beyond the wire.
//
//   - Into a tensor: Client.Get.
//   - Out of a tensor: Client.Put, Server.Register.
//   - Copies: the wire (Flight).
//
// # The wire
//
// Flight, Arrow IPC and Arrow's canonical extension type
// arrow.fixed_shape_tensor are the whole protocol; any Flight peer
// (pyarrow.flight, for one) speaks it. A tensor travels as record batches
// of one fixed_shape_tensor column (FixedSizeList storage): an (d0, d1,
// ..., dk) tensor is d0 rows of shape [d1, ..., dk], so pyarrow's
// FixedShapeTensorArray.to_numpy_ndarray() gives the tensor itself. A 1-d
// tensor is d0 rows of shape [1], a 0-d tensor one such row; the schema's
// metadata (MetaShape, MetaDType) carries the tensor's own shape and dtype
// so they come back as they went. A tensor larger than the message limit
// is split along its first dimension into several batches; Get puts them
// back together. Each batch's message leaves 512 bytes of the limit to
// its metadata (the IPC header and FlightData fields take under 256), so
// even a limit of a few KiB moves any tensor whose rows fit; a limit that
// cannot hold a row, or the schema message (the names and shapes), fails
// with ErrLimit saying which. Element types: int8..int64, uint8..uint64, float16,
// float32, float64 (what Arrow and DLPack share; Arrow booleans are bits).
// Received columns must be row-major: a fixed_shape_tensor whose
// permutation is not the identity is refused (ErrInvalid), as a column
// with nulls is, and so is extension metadata whose permutation or
// dim_names has not one entry per dimension, or dim_names that are not
// strings (Arrow's canonical extension spec).
//
// ListFlights and GetFlightInfo describe each tensor before it is fetched:
// the FlightDescriptor's path is the name, the ticket is the name, the
// schema is the stream's (with the metadata above), TotalRecords is d0,
// TotalBytes the tensor's bytes, and AppMetadata a JSON object
// {"name", "dtype", "shape", "bytes"} (Client.Info and Client.List read it,
// or the schema when a server sends none).
//
// # Parallel endpoints and several servers
//
// A tensor larger than Options.EndpointBytes (64 MiB by default) is
// described by several endpoints, each a RangeTicket for a range of rows
// of its first dimension, with the endpoint's app_metadata
// {"from", "to"}; the DoGet of a range streams those rows as a tensor of
// their own, so a Flight client that fetches the endpoints in order and
// concatenates them gets the tensor (DoGet of the name still streams it
// whole). Client.Get asks for the FlightInfo first and fetches several
// endpoints on up to ClientOptions.Streams streams at once, each straight
// into its slice of one 64-byte aligned buffer: the codec's copy out of
// gRPC's frames puts the values in their final place. Server.RegisterRemote
// describes a tensor whose ranges other servers hold (RemoteRange: rows,
// locations, ticket); Get dials each location with the client's options
// (token included: only at the address it was dialled with unless
// ClientOptions.TrustLocation trusts others) and tries an endpoint's
// locations, its replicas, in order, the next when one fails or stalls.
// With
// ClientOptions.PutRangeBytes, Put sends a large tensor as ranges of rows
// on parallel DoPuts (a FlightDescriptor command of this package) that a
// Server receives straight into one buffer and stores once every range
// has arrived; an upload left incomplete is dropped after StallTimeout.
//
// # Copies
//
// Sending (Server DoGet, Client.Put), the record batch shares the tensor's
// memory and the codec hands the values to gRPC as they are (holding the
// tensor until gRPC has written them): the one copy is gRPC's writer
// filling the socket's buffer; nothing before (arrow-go's own Flight
// writer first gathers the body into a bytes.Buffer, and protobuf would
// copy it into the message; dlflight does neither). Receiving, gRPC reads the socket into its frame
// buffers; the codec then copies the body once from those frames into a
// 64-byte aligned buffer of the allocator (protobuf-go would first gather
// the frames into one buffer and then copy the body again, to an address
// of no particular alignment), and the record batch and the Tensor share
// that buffer: no copy after gRPC hands over the message. By default a
// body of 1 MiB or more reuses a buffer that an earlier body of about its
// size left at its tensor's last release (see ClientOptions.Allocator):
// fresh memory for every large tensor would be faulted in page by page
// during that copy, which cost more than the copy (C++ allocators, and so
// pyarrow, reuse freed memory the same way). A tensor split
// over several batches is copied once more, into one buffer. Values a peer
// placed off a 64-byte boundary inside the body are never shared by
// chance: Tensor.DLPack copies them explicitly (FlagIsCopied), as JAX
// needs 64-byte alignment to alias memory.
//
// A tensor in a file mapping (a tensorfile Tensor, one of OpenNPY,
// OpenSafetensors, CreateNPY..., registered or put as it is) is the
// exception on the sending side: another process may cut the file short,
// and a read of a lost page faults (SIGBUS), which would kill the process
// if it happened in gRPC's writer goroutine. Its values are therefore
// copied into each message by the codec, on the sending goroutine, under
// a fault guard (one extra copy, of at most MaxMessageBytes at a time): a
// truncated file fails that DoGet with codes.Internal naming ErrTruncated
// (the server goes on serving) and Client.Put with an error wrapping
// ErrTruncated (tensorfile.ErrTruncated). The tensor is recognised by its
// Mapped method; a view of it under another type (a dlpack.Foreign of it)
// is sent without the guard.
//
// # Security and limits
//
// The network edge is the shared gRPC layer's (package dlgrpc, which
// dloip uses too): the options both services share have the same names
// and are documented once, on dlgrpc.ServerOptions and
// dlgrpc.ClientOptions, and every limit has a finite default, so that
// the zero Options may refuse a peer but nothing a peer sends ends the
// process.
//
// Options.TLS serves over TLS; Options.Tokens requires a bearer token in
// the "authorization" metadata (codes.Unauthenticated without one);
// Options.Authenticate replaces that static map with a function of the
// call's token and peer, its verified client certificate included
// (dlgrpc.AuthRequest), that returns the principal or an error: expiring
// or signed tokens, and mutual TLS with the principal taken from the
// certificate, plug in there. Either runs when a call's headers arrive,
// before any of its messages is read. Options.Allow is the per-name
// policy of each principal (dlgrpc.OpRead for ListFlights,
// GetFlightInfo, GetSchema and DoGet, dlgrpc.OpWrite for DoPut;
// codes.PermissionDenied). A panic in Authenticate, Allow or a release
// callback of a registered producer fails that call alone with
// codes.Internal and is reported to Options.Logger; the server serves on.
//
// MaxMessageBytes bounds every message (16 MiB by default; a larger
// tensor travels as several batches), MaxTensorBytes each DoPut stream
// (4 GiB), MaxTensors the tensors held (1,024), MaxStoredBytes what
// peers' DoPuts make the server hold at once, stored, being received or
// incomplete parallel uploads (4 GiB), and MaxConcurrentCalls the calls
// running at once (64): beyond any, codes.ResourceExhausted. A client
// is bounded as well: ClientOptions.MaxTensorBytes (4 GiB by default)
// ends a Get that receives more, as from a server streaming rows without
// end under a schema that does not give the tensor's shape, with an
// error wrapping ErrLimit; a FlightInfo that declares more fails before
// anything is allocated. A stream that lies (extension metadata that
// disagrees with the storage, nulls, a shape whose product overflows, a
// wrong value type, a truncated body) gets codes.InvalidArgument, and a
// message that breaks protobuf's wire format (dlgrpc.ErrMalformed) too;
// what was received is released and the server goes on serving.
//
// Every held tensor is released exactly once: when it is unregistered,
// replaced or the server shuts down, or, if a DoGet is still sending it
// then, once gRPC has written the last of it. A DoGet its reader cuts
// off (a cancelled call, a closed connection) ends there: gRPC frees the
// bytes it queued, or, for a connection that closed, drops them, and the
// server then collects garbage until they are found (bounded at 10 s)
// rather than wait for the next collection.
//
// A reader that stops reading without cancelling holds its tensor no
// longer than Options.StallTimeout (a minute by default): a DoGet that
// makes no progress that long loses its connection, and the tensor's
// bytes are reclaimed. A connection that does not finish its TLS
// handshake and HTTP/2 preface within Options.HandshakeTimeout (10 s) is
// closed. On the client, a stream of Get that receives nothing for
// ClientOptions.StallTimeout (10 s by default: a server alive but
// silent) is cut, and its range fetched from the next replica, while the
// caller's deadline still has time; with none left, the Get fails with
// an error wrapping ErrStalled.
//
// The token goes only where the user said: Get dials a location a
// FlightInfo names with the client's options, token included, only when
// it is the address the client was dialled with (host and port as
// written), or one ClientOptions.TrustLocation trusts; any other is
// never dialled (ErrLocation).
//
// # Transport
//
// Options.Transport and ClientOptions.Transport (dlgrpc.Transport) size
// gRPC's flow-control windows (16 MiB per stream and per connection by
// default, the stream's capped at the message limit) and socket buffers
// (1 MiB). The windows bound what is buffered, never what is accepted:
// the message limits hold whatever they are.
package dlflight
