// Package dlflight serves and fetches tensors over Arrow Flight (gRPC
// streams of Arrow record batches), so a Go service's tensors reach a
// model server on another machine or a Python worker on the same one with
// no format of its own and no copy beyond the wire.
//
// | package | X to a tensor, no copy | a tensor to X, shares memory | copies (named as such) |
// |---|---|---|---|
// | dlflight | Client.Get | Client.Put, Server.Register | the wire (Flight) |
package dlflight
