package dloip

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenMeta is the metadata of the token models: a prompt (BYTES [1])
// and a count (INT32 [1]) in, a token's text (BYTES [1]) and number
// (INT32 [1]) out.
func tokenMeta(name string) ModelMetadata {
	return ModelMetadata{Name: name,
		Inputs:  []TensorMetadata{{Name: "prompt", Datatype: BYTES, Shape: []int64{1}}, {Name: "n", Datatype: "INT32", Shape: []int64{1}}},
		Outputs: []TensorMetadata{{Name: "text", Datatype: BYTES, Shape: []int64{1}}, {Name: "index", Datatype: "INT32", Shape: []int64{1}}}}
}

// int32s is an INT32 tensor of vs, shape [len(vs)].
func int32s(vs ...int32) *testTensor {
	data := dlpack.AlignedSlice[byte](4 * len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(data[4*i:], uint32(v))
	}
	return &testTensor{dt: dlpack.Int32, shape: []int64{int64(len(vs))}, data: data, released: new(atomic.Int32)}
}

// token is the text of token i of prompt.
func token(prompt string, i int) string { return fmt.Sprintf("%s %d", prompt, i) }

// tokens is a StreamModel that answers a prompt and a count n with n
// responses, token i of them its text and i; with last, the n-th is the
// final response, else the request ends with none of its own (Triton's
// final flag sent alone). released counts the Releases of the outputs.
func tokens(name string, last bool, released *atomic.Int32) StreamModel {
	return StreamFunc(tokenMeta(name), func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		prompt := string(req.Input("prompt").Elements()[0])
		n := int(int32(binary.LittleEndian.Uint32(req.Input("n").Bytes())))
		out := func(i int) []Output {
			rel := func() { released.Add(1) }
			return []Output{{Name: "text", Tensor: Strings(token(prompt, i)), Release: rel}, {Name: "index", Tensor: int32s(int32(i)), Release: rel}}
		}
		for i := range n {
			if last && i == n-1 {
				return out(i), nil
			}
			if err := send(out(i)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}

// failsModel sends two tokens, then fails.
func failsModel() StreamModel {
	return StreamFunc(tokenMeta("fails"), func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		prompt := string(req.Input("prompt").Elements()[0])
		for i := range 2 {
			if err := send([]Output{{Name: "text", Tensor: Strings(token(prompt, i))}, {Name: "index", Tensor: int32s(int32(i))}}); err != nil {
				return nil, err
			}
		}
		return nil, errors.New("the model fails after two tokens")
	})
}

func tokenRequest(model, id, prompt string, n int32) *InferRequest {
	return &InferRequest{Model: model, ID: id, Inputs: []Input{{Name: "prompt", Tensor: Strings(prompt)}, {Name: "n", Tensor: int32s(n)}}}
}

// checkToken fails unless resp is token i of prompt, of request id.
func checkToken(t *testing.T, resp *InferResponse, id, prompt string, i int) {
	t.Helper()
	text, index := resp.Output("text"), resp.Output("index")
	if resp.ID != id || text == nil || index == nil || len(text.Elements()) != 1 || string(text.Elements()[0]) != token(prompt, i) ||
		int32(binary.LittleEndian.Uint32(index.Bytes())) != int32(i) {
		t.Fatalf("response %d of %q: %+v", i, id, resp)
	}
}

// serveStream serves models and stream models on loopback.
func serveStream(t *testing.T, opts Options, streams []StreamModel, models ...Model) (*Server, string) {
	t.Helper()
	s, addr := serve(t, opts, models...)
	for _, m := range streams {
		if err := s.RegisterStream(m); err != nil {
			t.Fatal(err)
		}
	}
	return s, addr
}

// A decoupled model's tokens, through Responses and through a Stream:
// n responses in order, each with its text and number; the final one
// marked as the protocol marks it: the last token when the model
// returns it, else an empty response only when the request asks for
// it. Every output is released.
func TestStreamTokens(t *testing.T) {
	var released atomic.Int32
	_, addr := serveStream(t, Options{}, []StreamModel{tokens("tokens", false, &released), tokens("last", true, &released)})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	for _, model := range []string{"tokens", "last"} {
		for _, n := range []int32{0, 1, 7} {
			i := 0
			for resp, err := range c.Responses(ctx, tokenRequest(model, "r", "hello", n)) {
				if err != nil {
					t.Fatal(err)
				}
				checkToken(t, resp, "r", "hello", i)
				if resp.Final != (model == "last" && i == int(n)-1) {
					t.Fatalf("%s: response %d of %d: final %v", model, i, n, resp.Final)
				}
				resp.Close()
				i++
			}
			if i != int(n) {
				t.Fatalf("%s: %d responses of %d", model, i, n)
			}
		}
	}
	// On a stream: the final flag of each response, as the request asks.
	for _, tc := range []struct {
		model      string
		emptyFinal bool
		// finals: each response's final flag; outputs: whether it has
		// any
		finals, outputs []bool
	}{
		{"tokens", false, []bool{false, false, false}, []bool{true, true, true}},
		{"tokens", true, []bool{false, false, false, true}, []bool{true, true, true, false}},
		{"last", false, []bool{false, false, true}, []bool{true, true, true}},
		{"last", true, []bool{false, false, true}, []bool{true, true, true}},
	} {
		s, err := c.InferStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := tokenRequest(tc.model, "s", "hi", 3)
		if tc.emptyFinal {
			req.Parameters = Parameters{ParamEmptyFinal: true}
		}
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		s.CloseSend()
		var finals, outputs []bool
		for {
			resp, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Outputs) > 0 {
				checkToken(t, resp, "s", "hi", len(finals))
			} else if resp.ID != "s" || resp.Model != tc.model {
				t.Fatalf("the empty final response: %+v", resp)
			}
			finals, outputs = append(finals, resp.Final), append(outputs, len(resp.Outputs) > 0)
			resp.Close()
		}
		if !slices.Equal(finals, tc.finals) || !slices.Equal(outputs, tc.outputs) {
			t.Fatalf("%s, empty final %v: final flags %v, outputs %v", tc.model, tc.emptyFinal, finals, outputs)
		}
		s.Close()
	}
	// every output, text and number, released once sent
	if want := int32(2 * (2*(0+1+7) + 4*3)); !countN(&released, want) {
		t.Fatalf("%d outputs released, want %d", released.Load(), want)
	}
}

// A Model on a stream answers each request with one response, final;
// requests sent together run together and answer in the order they
// came, as Triton's non-decoupled models do, whichever finishes first.
// A StreamModel through ModelInfer is refused as Triton refuses a
// decoupled model.
func TestStreamModelAndOrder(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "INT32", Shape: []int64{1}}
	var running, most atomic.Int32
	slow := ModelFunc(ModelMetadata{Name: "slow", Inputs: []TensorMetadata{x}, Outputs: []TensorMetadata{x}}, func(ctx context.Context, req *Request) ([]Output, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// the first requests take longest
		v := int32(binary.LittleEndian.Uint32(req.Inputs[0].Bytes()))
		time.Sleep(time.Duration(8-v) * 10 * time.Millisecond)
		return []Output{{Name: "x", Tensor: req.Inputs[0]}}, nil
	})
	var released atomic.Int32
	_, addr := serveStream(t, Options{}, []StreamModel{tokens("tokens", true, &released)}, slow)
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	s, err := c.InferStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range int32(8) {
		if err := s.Send(&InferRequest{Model: "slow", ID: fmt.Sprint(i), Inputs: []Input{{Name: "x", Tensor: int32s(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	s.CloseSend()
	for i := range 8 {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.ID != fmt.Sprint(i) || !resp.Final || int32(binary.LittleEndian.Uint32(resp.Output("x").Bytes())) != int32(i) {
			t.Fatalf("response %d: id %q, final %v", i, resp.ID, resp.Final)
		}
		resp.Close()
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: %v", err)
	}
	if m := most.Load(); m < 2 || m > DefaultMaxStreamRequests {
		t.Fatalf("%d requests ran at once, want 2 to %d", m, DefaultMaxStreamRequests)
	}
	t.Logf("8 requests on one stream, %d at once, answered in order", most.Load())
	_, err = c.Infer(ctx, tokenRequest("tokens", "", "x", 1))
	wantStatus(t, err, codes.Unimplemented, "doesn't support models with decoupled transaction policy", `"tokens"`)
}

// A request that fails is answered with its error, naming the request,
// and the stream goes on: an unknown model, an input the model does not
// take, a model that fails after two tokens, one that panics, an output
// that breaks the metadata (sent: the request fails there), a model
// that sends after it returned. Every output is released.
func TestStreamRequestErrors(t *testing.T) {
	var released atomic.Int32
	meta := tokenMeta("panics")
	panics := StreamFunc(meta, func(context.Context, *Request, func([]Output) error) ([]Output, error) {
		panic("the stream model panics")
	})
	meta.Name = "breaks"
	sendErrs := make(chan error, 1)
	breaks := StreamFunc(meta, func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		rel := func() { released.Add(1) }
		err := send([]Output{{Name: "text", Tensor: int32s(1), Release: rel}, {Name: "index", Tensor: int32s(1), Release: rel}})
		sendErrs <- err
		if err == nil {
			return nil, nil
		}
		// a send after a failed one fails too, its outputs released
		if err := send([]Output{{Name: "index", Tensor: int32s(1), Release: rel}}); err == nil {
			return nil, errors.New("a send after a failed one succeeded")
		}
		return nil, nil
	})
	meta.Name = "late"
	lateSend := make(chan func([]Output) error, 1)
	late := StreamFunc(meta, func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		lateSend <- send
		return []Output{{Name: "text", Tensor: Strings("only")}, {Name: "index", Tensor: int32s(0)}}, nil
	})
	_, addr := serveStream(t, Options{Logger: quiet}, []StreamModel{tokens("tokens", true, &released), failsModel(), panics, breaks, late})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	s, err := c.InferStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := tokenRequest("tokens", "shape", "x", 1)
	bad.Inputs[1].Tensor = int32s(1, 2)
	for _, tc := range []struct {
		req    *InferRequest
		tokens int
		parts  []string
	}{
		{tokenRequest("nothing", "unknown", "x", 1), 0, []string{`"nothing"`, "no such model"}},
		{bad, 0, []string{`input "n": shape`}},
		{tokenRequest("fails", "fails", "f", 2), 2, []string{"the model fails after two tokens"}},
		{tokenRequest("panics", "panics", "x", 1), 0, []string{"the stream model panics", "recovered from a panic"}},
		{tokenRequest("breaks", "breaks", "x", 1), 0, []string{`output "text": datatype = INT32`, "BYTES"}},
	} {
		if err := s.Send(tc.req); err != nil {
			t.Fatal(err)
		}
		for i := range tc.tokens {
			resp, err := s.Recv()
			if err != nil {
				t.Fatalf("%s: token %d: %v", tc.req.ID, i, err)
			}
			if resp.Final {
				t.Fatalf("%s: token %d is final", tc.req.ID, i)
			}
			resp.Close()
		}
		_, err := s.Recv()
		var re *ResponseError
		if !errors.As(err, &re) || !errors.Is(err, ErrResponse) || re.ID != tc.req.ID {
			t.Fatalf("%s: %v, want a ResponseError naming it", tc.req.ID, err)
		}
		for _, p := range tc.parts {
			if !strings.Contains(re.Message, p) {
				t.Fatalf("%s: %q lacks %q", tc.req.ID, re.Message, p)
			}
		}
		t.Logf("%s: %v", tc.req.ID, err)
		// the stream goes on
		if err := s.Send(tokenRequest("tokens", "good", "g", 2)); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			resp, err := s.Recv()
			if err != nil {
				t.Fatalf("after %s: %v", tc.req.ID, err)
			}
			checkToken(t, resp, "good", "g", i)
			resp.Close()
		}
	}
	if err := <-sendErrs; err == nil || !strings.Contains(err.Error(), "datatype") {
		t.Fatalf("the send of an output that breaks the metadata: %v", err)
	}
	// a send after the model returned fails with ErrClosed
	if err := s.Send(tokenRequest("late", "late", "x", 1)); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil || !resp.Final {
		t.Fatalf("late: %v", err)
	}
	resp.Close()
	rel := atomic.Int32{}
	if err := (<-lateSend)([]Output{{Name: "index", Tensor: int32s(1), Release: func() { rel.Add(1) }}}); !errors.Is(err, dlpack.ErrClosed) || rel.Load() != 1 {
		t.Fatalf("a send after InferStream returned: %v, released %d", err, rel.Load())
	}
	if want := int32(2*5*2 + 3); !countN(&released, want) {
		t.Fatalf("%d outputs released, want %d", released.Load(), want)
	}
}

// blocking is a StreamModel that sends one token, then waits for
// release (or its context's end), counting the requests it runs at once.
type blocking struct {
	release       chan struct{}
	started       chan struct{}
	running, most atomic.Int32
}

func (b *blocking) model(name string) StreamModel {
	return StreamFunc(tokenMeta(name), func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		n := b.running.Add(1)
		defer b.running.Add(-1)
		for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
		}
		b.started <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []Output{{Name: "text", Tensor: Strings(token("b", 0))}, {Name: "index", Tensor: int32s(0)}}, nil
	})
}

// The requests of one stream run at once up to MaxStreamRequests, each
// beyond the first in a place of MaxConcurrentCalls: with 3 places, a
// stream runs 3 requests at once (its own and 2 more) and a ModelInfer
// is then refused; with places to spare, MaxStreamRequests bounds it.
// The stream reads its next request once one ends, and every request
// is answered.
func TestStreamConcurrency(t *testing.T) {
	for _, tc := range []struct {
		calls, streamRequests, want int
	}{{3, 8, 3}, {64, 4, 4}} {
		b := &blocking{release: make(chan struct{}), started: make(chan struct{}, 16)}
		x := TensorMetadata{Name: "x", Datatype: "INT32", Shape: []int64{1}}
		_, addr := serveStream(t, Options{MaxConcurrentCalls: tc.calls, MaxStreamRequests: tc.streamRequests}, []StreamModel{b.model("block")}, echoModel("echo", x))
		c := dial(t, addr, ClientOptions{})
		ctx := ctxT(t)
		s, err := c.InferStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const requests = 10
		for i := range requests {
			if err := s.Send(tokenRequest("block", fmt.Sprint(i), "b", 1)); err != nil {
				t.Fatal(err)
			}
		}
		for range tc.want {
			<-b.started
		}
		time.Sleep(100 * time.Millisecond)
		if n := b.running.Load(); n != int32(tc.want) {
			t.Fatalf("%+v: %d requests run at once, want %d", tc, n, tc.want)
		}
		_, err = c.Infer(ctx, &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: int32s(1)}}})
		if tc.calls == tc.want {
			wantStatus(t, err, codes.ResourceExhausted, "MaxConcurrentCalls")
		} else if err != nil {
			t.Fatal(err)
		}
		close(b.release)
		s.CloseSend()
		got := 0
		for {
			resp, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Close()
			got++
		}
		if got != requests || b.most.Load() != int32(tc.want) {
			t.Fatalf("%+v: %d responses, %d at once", tc, got, b.most.Load())
		}
		s.Close()
	}
}

// A client that does not read slows the model down instead of making
// the server buffer: a model that would send 100,000 responses of 64
// KiB (6 GiB) is held at send once gRPC's window and socket buffers are
// full, and goes on when the client reads again, every response then
// arriving whole. A client that stops reading for good is cut after
// StallTimeout: the model's send fails, and every output it made is
// released.
func TestStreamBackPressure(t *testing.T) {
	const size, count = 64 << 10, 100000
	meta := ModelMetadata{Name: "flood", Inputs: []TensorMetadata{{Name: "n", Datatype: "INT32", Shape: []int64{1}}},
		Outputs: []TensorMetadata{{Name: "y", Datatype: "UINT8", Shape: []int64{size}}}}
	var made, released atomic.Int64
	src := newRaw(t, dlpack.Uint8, size)
	var sendErr atomic.Value
	flood := StreamFunc(meta, func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		n := int(binary.LittleEndian.Uint32(req.Inputs[0].Bytes()))
		for range n {
			made.Add(1)
			if err := send([]Output{{Name: "y", Tensor: src, Release: func() { released.Add(1) }}}); err != nil {
				sendErr.Store(err)
				return nil, err
			}
		}
		return nil, nil
	})
	const stall = 500 * time.Millisecond
	s, addr := serveStream(t, Options{StallTimeout: stall}, []StreamModel{flood})
	c := dial(t, addr, ClientOptions{})
	ctx := ctxT(t)
	st, err := c.InferStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&InferRequest{Model: "flood", Inputs: []Input{{Name: "n", Tensor: int32s(count)}}}); err != nil {
		t.Fatal(err)
	}
	// read some, then pause for less than StallTimeout, three times
	read := 0
	recv := func(n int) {
		for range n {
			resp, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if y := resp.Output("y"); y == nil || len(y.Bytes()) != size || y.Bytes()[7] != src.data[7] {
				t.Fatal("a response differs")
			}
			resp.Close()
			read++
		}
	}
	var most int64
	for range 3 {
		recv(100)
		time.Sleep(stall / 2)
		ahead := made.Load() - int64(read)
		most = max(most, ahead)
		// the window (16 MiB) and the sockets' buffers, in 64 KiB
		// responses, and a few being sent
		if ahead > 1024 {
			t.Fatalf("the model is %d responses (%d MiB) ahead of its reader", ahead, ahead*size>>20)
		}
	}
	t.Logf("the model ran at most %d responses (%d MiB) ahead of a reader that pauses", most, most*size>>20)
	// stop reading for good
	start := time.Now()
	for sendErr.Load() == nil {
		if time.Since(start) > 20*stall+10*time.Second {
			t.Fatalf("the model still sends %v after its reader stopped", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for released.Load() != made.Load() || s.srv.Held() != 0 {
		if time.Since(start) > 20*stall+10*time.Second {
			// what every goroutine is doing: who still holds the buffers
			var stacks strings.Builder
			pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Fatalf("%d of %d outputs released, %d buffers held, %v after the reader stopped; the goroutines:\n%s",
				released.Load(), made.Load(), s.srv.Held(), time.Since(start), stacks.String())
		}
		// the buffers gRPC dropped with the cut connection are found by
		// a collection (the server's own search for them stops after
		// 10 s)
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("cut %v after the reader stopped, with %d responses sent: %v", time.Since(start).Round(time.Millisecond), made.Load(), sendErr.Load())
	if made.Load() >= count {
		t.Fatal("the model sent every response to a reader that stopped")
	}
	st.Close()
	// the server serves on
	r2, err := dial(t, addr, ClientOptions{}).InferStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Send(&InferRequest{Model: "flood", Inputs: []Input{{Name: "n", Tensor: int32s(1)}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := r2.Recv(); err != nil {
		t.Fatal(err)
	} else {
		resp.Close()
	}
}

// A client that closes its stream, or cancels it, mid-request ends it
// there: the model's context ends, its send fails, everything it sent
// or made is released, and the server serves on; so does a client
// that goes away.
func TestStreamCancel(t *testing.T) {
	var released atomic.Int32
	stopped := make(chan error, 3)
	meta := tokenMeta("endless")
	endless := StreamFunc(meta, func(ctx context.Context, req *Request, send func([]Output) error) ([]Output, error) {
		for i := 0; ; i++ {
			rel := func() { released.Add(1) }
			if err := send([]Output{{Name: "text", Tensor: Strings(token("e", i)), Release: rel}, {Name: "index", Tensor: int32s(int32(i)), Release: rel}}); err != nil {
				stopped <- ctx.Err()
				return nil, err
			}
		}
	})
	s, addr := serveStream(t, Options{}, []StreamModel{endless, tokens("tokens", true, &released)})
	for _, how := range []string{"close", "cancel", "close the client"} {
		c := dial(t, addr, ClientOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		st, err := c.InferStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(tokenRequest("endless", "e", "e", 0)); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			resp, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			resp.Close()
		}
		switch how {
		case "close":
			st.Close()
		case "cancel":
			cancel()
		default:
			c.Close()
		}
		select {
		case err := <-stopped:
			if err == nil {
				t.Fatalf("%s: the model's context did not end", how)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the model still sends", how)
		}
		if _, err := st.Recv(); err == nil {
			t.Fatalf("%s: a response after the stream ended", how)
		}
		cancel()
	}
	s.srv.Reclaim(10 * time.Second)
	if s.srv.Held() != 0 {
		t.Fatalf("%d buffers held", s.srv.Held())
	}
	c := dial(t, addr, ClientOptions{})
	for resp, err := range c.Responses(ctxT(t), tokenRequest("tokens", "after", "a", 2)) {
		if err != nil {
			t.Fatal(err)
		}
		resp.Close()
	}
	// every output of a response sent is released; a send that failed
	// released its own
	deadline := time.Now().Add(10 * time.Second)
	for released.Load()%2 != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if released.Load()%2 != 0 || released.Load() < 2*(3*10+2) {
		t.Fatalf("%d outputs released", released.Load())
	}
}

// Shutdown with a stream open and a request running on it: the request
// finishes and is answered, a request sent meanwhile is answered
// codes.Unavailable, and Shutdown returns once nothing runs, ending the
// idle stream.
func TestStreamShutdown(t *testing.T) {
	b := &blocking{release: make(chan struct{}), started: make(chan struct{}, 4)}
	s := NewServer(Options{})
	if err := s.RegisterStream(b.model("block")); err != nil {
		t.Fatal(err)
	}
	lis, addr := listen(t)
	go s.Serve(lis)
	c := dial(t, addr, ClientOptions{})
	st, err := c.InferStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Send(tokenRequest("block", "running", "b", 1)); err != nil {
		t.Fatal(err)
	}
	<-b.started
	done := make(chan struct{})
	go func() {
		s.Shutdown()
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	if err := st.Send(tokenRequest("block", "late", "b", 1)); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	var re *ResponseError
	if !errors.As(err, &re) || re.ID != "late" || !strings.Contains(re.Message, "shutting down") {
		t.Fatalf("a request during Shutdown: %v", err)
	}
	select {
	case <-done:
		t.Fatal("Shutdown returned with a request running")
	case <-time.After(100 * time.Millisecond):
	}
	close(b.release)
	resp, err := st.Recv()
	if err != nil || resp.ID != "running" {
		t.Fatalf("the running request: %v", err)
	}
	resp.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not end the idle stream")
	}
	if _, err := st.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("the stream Shutdown ended: %v", err)
	} else if st, _ := status.FromError(err); st.Code() == codes.OK {
		t.Fatal(err)
	}
}

// listen is a loopback listener and its address.
func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis, lis.Addr().String()
}

// A stream that is only idle, its client thinking between requests for
// many StallTimeouts, keeps its connection: only time spent sending
// counts as a stall.
func TestStreamIdle(t *testing.T) {
	const stall = 100 * time.Millisecond
	var released atomic.Int32
	_, addr := serveStream(t, Options{StallTimeout: stall}, []StreamModel{tokens("last", true, &released)})
	c := dial(t, addr, ClientOptions{})
	s, err := c.InferStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		time.Sleep(5 * stall)
		if err := s.Send(tokenRequest("last", fmt.Sprint(i), "idle", 2)); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			resp, err := s.Recv()
			if err != nil {
				t.Fatalf("after %v idle: %v", 5*stall, err)
			}
			checkToken(t, resp, fmt.Sprint(i), "idle", j)
			resp.Close()
		}
	}
}
