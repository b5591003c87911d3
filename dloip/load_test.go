package dloip

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// TestLoad: 16 clients on 127.0.0.1, each making a bounded number of
// calls (sizes from 16 B to 1 MiB, some cancelled midway), against one
// server: 0 errors among the calls not cancelled, every byte back as
// sent, and nothing outstanding at the end (each producer released once
// per call, no export left). Bounded in count (16 x 40 calls) and time
// (60 s).
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	y := TensorMetadata{Name: "y", Datatype: "UINT8", Shape: []int64{-1}}
	_, addr := serve(t, Options{}, echoModel("echo", x, y))
	const clients, calls = 16, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var errs, ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	var sent atomic.Int64
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := Dial(addr, ClientOptions{})
			if err != nil {
				errs.Add(1)
				return
			}
			defer cl.Close()
			for i := range calls {
				n := int64(4) << (2 * ((c + i) % 9)) // 16 B .. 1 MiB of FP32
				a := newRaw(t, dlpack.Float32, n/4)
				b := newRaw(t, dlpack.Uint8, int64(i+1))
				cctx := ctx
				var stop context.CancelFunc
				if i%10 == 9 {
					cctx, stop = context.WithTimeout(ctx, 200*time.Microsecond)
				}
				resp, err := cl.Infer(cctx, &InferRequest{Model: "echo", ID: fmt.Sprint(c, "/", i),
					Inputs: []Input{{Name: "x", Tensor: a}, {Name: "y", Tensor: b}}})
				if stop != nil {
					stop()
				}
				switch {
				case err != nil && stop != nil:
					cancelled.Add(1)
				case err != nil:
					t.Errorf("client %d call %d: %v", c, i, err)
					errs.Add(1)
				default:
					if !bytes.Equal(resp.Output("x").Bytes(), a.data) || !bytes.Equal(resp.Output("y").Bytes(), b.data) || resp.ID != fmt.Sprint(c, "/", i) {
						t.Errorf("client %d call %d: bytes differ", c, i)
						errs.Add(1)
					}
					resp.Close()
					ok.Add(1)
					sent.Add(n + int64(i+1))
				}
				if !releasedN(a, 1) || !releasedN(b, 1) {
					t.Errorf("client %d call %d: an input released %d and %d times", c, i, a.released.Load(), b.released.Load())
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	for i := 0; dlpack.Outstanding() != 0 && i < 200; i++ {
		gcWait()
	}
	t.Logf("load: %d clients x %d calls: %d ok, %d cancelled by their deadline, %d errors, %.1f MiB each way in %v, outstanding exports %d",
		clients, calls, ok.Load(), cancelled.Load(), errs.Load(), float64(sent.Load())/(1<<20), el.Round(time.Millisecond), dlpack.Outstanding())
	if errs.Load() != 0 || dlpack.Outstanding() != 0 {
		t.Fatal("errors or outstanding exports")
	}
}
