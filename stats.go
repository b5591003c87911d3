package dlpack

import "sync/atomic"

var (
	goExports     exportCount  // Go-memory exports not yet released
	oneOffExports atomic.Int64 // those of them in a one-off block (ndim above keptNDim)
	leakedImports atomic.Int64 // imports released by the cleanup, never closed
)

// Outstanding returns how many tensors exported by this package (Go memory
// and Buffers) have not yet been released by their consumers. It is the
// number to watch for leaks: after every consumer is done it is 0.
func Outstanding() int64 {
	return goExports.Load() + atomic.LoadInt64(bufferExports)
}

// Stats are the package's counters, for tests and leak monitoring.
type Stats struct {
	GoExports     int64 // Go-memory exports not yet released
	BufferExports int64 // Buffer exports not yet released
	LeakedImports int64 // imported tensors released by the cleanup because nobody closed them
	BadReleases   int64 // deleter calls on a struct that was not live (a second call, or not ours)
	CBlocks       int64 // C allocations of this package in use: blocks of outstanding exports, and buffers
	KeptBlocks    int64 // C blocks that idle export records keep for their next export (bounded by the free list)
}

// ReadStats returns the current counters. Each is read atomically, but not
// all at the same instant.
func ReadStats() Stats {
	// Records' own blocks are counted by allocation only (keptBlocks), so
	// the export hot path updates no block counter: those in use are the
	// Go exports not in one-off blocks.
	inUse := goExports.Load() - oneOffExports.Load()
	kept := atomic.LoadInt64(keptBlocks)
	return Stats{
		GoExports:     goExports.Load(),
		BufferExports: atomic.LoadInt64(bufferExports),
		LeakedImports: leakedImports.Load(),
		BadReleases:   atomic.LoadInt64(badReleases),
		CBlocks:       atomic.LoadInt64(liveBlocks) + inUse,
		KeptBlocks:    kept - inUse,
	}
}
