package dlflight

import "github.com/godlpack/dlpack/dlgrpc"

// Align is the alignment of every received tensor's data that a Tensor
// shares: JAX aliases CPU memory only at 64 bytes, and so does Arrow.
const Align = dlgrpc.Align

// Tensor is a tensor received over Flight (Client.Get): a CPU tensor
// sharing the received message body, which the codec copied once out of
// gRPC's frame buffers into a 64-byte aligned buffer (see the package
// documentation), or, for a tensor that came as several batches or
// endpoints, the one buffer they were put together in. It is the shared
// wire layer's received tensor (dlgrpc.Tensor): a dlpack.Source and a
// dlpack.Producer, writable (the memory is the receiver's alone), valid
// until it is closed and every export's deleter has run. A body whose
// values a peer placed off a 64-byte boundary is not shared:
// DescribeTensor refuses it and DLPack copies it.
type Tensor = dlgrpc.Tensor
