package dlpack

// ReleaseIdle frees what idle export records keep for their next export
// (each its C block and its runtime/cgo handle) and returns how many it
// released; it leaves records in use alone. Exports after it allocate new
// records as needed. Safe to call at any time, from any goroutine.
//
// Without it, idle records are bounded by the free lists: at most 4,105 per
// shard (the free list, the hot slot and the reuse ring) and 16 shards,
// 65,680 records, each keeping a 232-byte C block
// (Stats.KeptBlocks counts them: about 15 MB of C memory at most) and about
// 240 bytes of Go memory for the record and its handle. A burst of n
// exports outstanding at once leaves min(n, that bound) idle records
// behind; a process that will not export that many at once again can call
// ReleaseIdle to return the memory.
//
// As with free in C, a deleter called a second time on a tensor whose
// record has been released this way is a use after free.
func ReleaseIdle() int {
	n := 0
	for i := range records {
		s := &records[i]
		var idle []*exportRecord
		if rec := s.hot.Swap(nil); rec != nil {
			idle = append(idle, rec)
		}
		for j := range s.ring {
			if rec := s.ring[j].Swap(nil); rec != nil {
				idle = append(idle, rec)
			}
		}
		s.mu.Lock()
		idle = append(idle, s.free...)
		s.free = nil
		s.mu.Unlock()
		for _, rec := range idle {
			deleteHandle(rec.handle)
			if rec.block != nil {
				cKeptFree(rec.block)
			}
		}
		n += len(idle)
	}
	return n
}
