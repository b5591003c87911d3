package dlflight

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// watchStall bounds how long a stream of Get may go without progress
// (ClientOptions.StallTimeout): it returns a context for the stream that
// is cancelled once no message of it and no byte of c's connection
// arrived for that long, the function recv calls on each message, and
// the function that ends the watch (deferred by the caller). err turns
// the stream's error into one wrapping ErrStalled when the watch cut it.
func (c *Client) watchStall(parent context.Context) (ctx context.Context, tick func(), err func(error) error, stop func()) {
	timeout := c.opts.StallTimeout
	if timeout < 0 {
		return parent, func() {}, func(e error) error { return e }, func() {}
	}
	ctx, cancel := context.WithCancelCause(parent)
	var msgs atomic.Int64
	done := make(chan struct{})
	stalled := fmt.Errorf("%w: nothing arrived for %v (ClientOptions.StallTimeout)", ErrStalled, timeout)
	go func() {
		t := time.NewTicker(max(timeout/8, time.Millisecond))
		defer t.Stop()
		progress := func() int64 { return msgs.Load() + c.conn.Received() }
		last, at := progress(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if p := progress(); p != last {
				last, at = p, time.Now()
			} else if time.Since(at) >= timeout {
				cancel(stalled)
				return
			}
		}
	}()
	err = func(e error) error {
		if e != nil && context.Cause(ctx) == stalled && parent.Err() == nil {
			return stalled
		}
		return e
	}
	return ctx, func() { msgs.Add(1) }, err, func() { close(done); cancel(nil) }
}
