package dloip_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
)

// serve starts s on a loopback port and returns the address and the
// function that stops it.
func serve(s *dloip.Server) (string, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go s.Serve(lis)
	return lis.Addr().String(), s.Shutdown
}

// A Go function served over the Open Inference Protocol: any client of
// the protocol (tritonclient, kserve's, a dloip Client) calls it.
func ExampleServer() {
	meta := dloip.ModelMetadata{Name: "scale",
		Inputs:  []dloip.TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
		Outputs: []dloip.TensorMetadata{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}}}
	scale := dloip.ModelFunc(meta, func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
		f, err := dlpack.From(req.Input("x")) // the received bytes, shared
		if err != nil {
			return nil, err
		}
		defer f.Close()
		xs, err := dlpack.ReadOnlySlice[float32](f)
		if err != nil {
			return nil, err
		}
		ys := make([]float32, len(xs))
		for i, x := range xs {
			ys[i] = 10 * x
		}
		return []dloip.Output{{Name: "y", Tensor: dlpack.NewArray(ys, []int64{int64(len(ys))})}}, nil
	})
	s := dloip.NewServer(dloip.Options{})
	if err := s.Register(scale); err != nil {
		panic(err)
	}
	addr, stop := serve(s)
	defer stop()

	c, err := dloip.Dial(addr, dloip.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	mm, _ := c.ModelMetadata(context.Background(), "scale", "")
	fmt.Println(mm.Inputs[0].Name, mm.Inputs[0].Datatype, mm.Inputs[0].Shape)
	// Output: x FP32 [-1]
}

// A client's call: inputs go out from their own memory, outputs come
// back as tensors sharing the received bytes, 64-byte aligned, for
// NumPy, JAX or gonum without another copy.
func ExampleClient_Infer() {
	s := dloip.NewServer(dloip.Options{})
	s.Register(dloip.ModelFunc(dloip.ModelMetadata{Name: "echo", Dynamic: true},
		func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
			return []dloip.Output{{Name: "y", Tensor: req.Input("x")}}, nil
		}))
	addr, stop := serve(s)
	defer stop()

	c, _ := dloip.Dial(addr, dloip.ClientOptions{})
	defer c.Close()
	x := dlpack.NewArray([]int32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	resp, err := c.Infer(context.Background(), &dloip.InferRequest{Model: "echo", Inputs: []dloip.Input{{Name: "x", Tensor: x}}})
	if err != nil {
		panic(err)
	}
	defer resp.Close()
	y := resp.Output("y")
	f, _ := dlpack.From(y)
	defer f.Close()
	ys, _ := dlpack.ReadOnlySlice[int32](f)
	fmt.Println(y.Datatype(), y.Shape(), ys, y.Aligned())
	// Output: INT32 [2 3] [1 2 3 4 5 6] true
}

// A model that takes what it is sent: a Dynamic model sees every input
// the request carries, whatever its name, datatype and shape, and
// returns any outputs.
func ExampleModelMetadata_dynamic() {
	router := dloip.ModelFunc(dloip.ModelMetadata{Name: "describe", Dynamic: true},
		func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
			var lines []string
			for _, in := range req.Inputs {
				lines = append(lines, fmt.Sprintf("%s %s %v", in.Name(), in.Datatype(), in.Shape()))
			}
			return []dloip.Output{{Name: "summary", Tensor: dloip.Strings(lines...)}}, nil
		})
	s := dloip.NewServer(dloip.Options{})
	s.Register(router)
	addr, stop := serve(s)
	defer stop()

	c, _ := dloip.Dial(addr, dloip.ClientOptions{})
	defer c.Close()
	resp, err := c.Infer(context.Background(), &dloip.InferRequest{Model: "describe", Inputs: []dloip.Input{
		{Name: "image", Tensor: dlpack.NewArray(make([]uint8, 12), []int64{2, 2, 3})},
		{Name: "threshold", Tensor: dlpack.NewArray([]float64{0.5}, []int64{})},
	}})
	if err != nil {
		panic(err)
	}
	defer resp.Close()
	for _, line := range resp.Output("summary").Elements() {
		fmt.Println(string(line))
	}
	// Output:
	// image UINT8 [2 2 3]
	// threshold FP64 []
}

// Text, the protocol's BYTES: prompts in, completions out, each element
// a byte string.
func ExampleBytesTensor() {
	shout := dloip.ModelFunc(dloip.ModelMetadata{Name: "shout",
		Inputs:  []dloip.TensorMetadata{{Name: "text", Datatype: dloip.BYTES, Shape: []int64{-1}}},
		Outputs: []dloip.TensorMetadata{{Name: "text", Datatype: dloip.BYTES, Shape: []int64{-1}}}},
		func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
			in := req.Input("text")
			out := &dloip.BytesTensor{Shape: in.Shape()}
			for _, e := range in.Elements() { // views of the received bytes
				out.Elements = append(out.Elements, []byte(strings.ToUpper(string(e))+"!"))
			}
			return []dloip.Output{{Name: "text", Tensor: out}}, nil
		})
	s := dloip.NewServer(dloip.Options{})
	s.Register(shout)
	addr, stop := serve(s)
	defer stop()

	c, _ := dloip.Dial(addr, dloip.ClientOptions{})
	defer c.Close()
	resp, err := c.Infer(context.Background(), &dloip.InferRequest{Model: "shout",
		Inputs: []dloip.Input{{Name: "text", Tensor: dloip.Strings("hello", "world")}}})
	if err != nil {
		panic(err)
	}
	defer resp.Close()
	for _, e := range resp.Output("text").Elements() {
		fmt.Println(string(e))
	}
	// Output:
	// HELLO!
	// WORLD!
}

// Shared memory from Go: a region created, mapped and registered in a
// few calls; an input whose tensor lies in it goes by reference, and an
// output asked for in it is written there by the server.
func ExampleRegion() {
	s := dloip.NewServer(dloip.Options{})
	s.Register(dloip.ModelFunc(dloip.ModelMetadata{Name: "echo", Dynamic: true},
		func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
			return []dloip.Output{{Name: "y", Tensor: req.Input("x")}}, nil
		}))
	addr, stop := serve(s)
	defer stop()
	c, _ := dloip.Dial(addr, dloip.ClientOptions{})
	defer c.Close()

	r, err := dloip.CreateRegion(fmt.Sprintf("example-%d", os.Getpid()), 1<<20)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	x, _ := r.Tensor(0, dlpack.Uint8, []int64{4})
	copy(r.Bytes(), []byte{1, 2, 3, 4})
	if err := c.RegisterRegion(context.Background(), "mem", r); err != nil {
		panic(err)
	}
	defer c.UnregisterRegion(context.Background(), "mem")
	out := r.Bytes()[64:68]
	resp, err := c.Infer(context.Background(), &dloip.InferRequest{Model: "echo",
		Inputs:  []dloip.Input{{Name: "x", Tensor: x}},                                         // by reference: no bytes on the wire
		Outputs: []dloip.RequestedOutput{{Name: "y", Region: "mem", Offset: 64, Memory: out}}}) // written into the region
	if err != nil {
		panic(err)
	}
	resp.Close()
	fmt.Println(out)
	// Output: [1 2 3 4]
}

// A token stream: a StreamModel (Triton's decoupled models, an LLM
// streaming its tokens) sends each response as it makes it and returns
// the last; Client.Responses iterates over them up to the final one, on
// Triton's ModelStreamInfer (tritonclient's start_stream calls it too).
func ExampleClient_Responses() {
	meta := dloip.ModelMetadata{Name: "count",
		Inputs:  []dloip.TensorMetadata{{Name: "prompt", Datatype: dloip.BYTES, Shape: []int64{1}}},
		Outputs: []dloip.TensorMetadata{{Name: "token", Datatype: dloip.BYTES, Shape: []int64{1}}}}
	s := dloip.NewServer(dloip.Options{})
	s.RegisterStream(dloip.StreamFunc(meta, func(ctx context.Context, req *dloip.Request, send func([]dloip.Output) error) ([]dloip.Output, error) {
		prompt := string(req.Input("prompt").Elements()[0])
		for i := range 3 {
			// send blocks while the client does not read: a slow reader
			// slows the model down
			if err := send([]dloip.Output{{Name: "token", Tensor: dloip.Strings(fmt.Sprintf("%s %d", prompt, i))}}); err != nil {
				return nil, err
			}
		}
		return []dloip.Output{{Name: "token", Tensor: dloip.Strings("done")}}, nil // the final response
	}))
	addr, stop := serve(s)
	defer stop()

	c, _ := dloip.Dial(addr, dloip.ClientOptions{})
	defer c.Close()
	req := &dloip.InferRequest{Model: "count", Inputs: []dloip.Input{{Name: "prompt", Tensor: dloip.Strings("tick")}}}
	for resp, err := range c.Responses(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		fmt.Println(string(resp.Output("token").Elements()[0]), resp.Final)
		resp.Close()
	}
	// Output:
	// tick 0 false
	// tick 1 false
	// tick 2 false
	// done true
}

// The same Server over the protocol's REST binding (what curl, kserve's
// InferenceRESTClient and tritonclient.http speak), and a RESTClient
// calling it: tensors go as Triton's binary data by default, or as JSON
// values (WithJSON).
func ExampleDialREST() {
	s := dloip.NewServer(dloip.Options{})
	s.Register(dloip.ModelFunc(dloip.ModelMetadata{Name: "echo", Dynamic: true},
		func(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
			return []dloip.Output{{Name: "y", Tensor: req.Input("x")}}, nil
		}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go s.ServeREST(lis) // with Options.TLS set, HTTPS
	defer s.Shutdown()

	c, err := dloip.DialREST("http://"+lis.Addr().String(), dloip.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	x := dlpack.NewArray([]float32{1, 2.5, -3}, []int64{3})
	for _, rc := range []*dloip.RESTClient{c, c.WithJSON()} {
		resp, err := rc.Infer(context.Background(), &dloip.InferRequest{Model: "echo", Inputs: []dloip.Input{{Name: "x", Tensor: x}}})
		if err != nil {
			panic(err)
		}
		y := resp.Output("y")
		f, _ := dlpack.From(y)
		ys, _ := dlpack.ReadOnlySlice[float32](f)
		fmt.Println(y.Datatype(), y.Shape(), ys)
		f.Close()
		resp.Close()
	}
	// Output:
	// FP32 [3] [1 2.5 -3]
	// FP32 [3] [1 2.5 -3]
}
