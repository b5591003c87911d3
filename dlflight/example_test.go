package dlflight_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlflight"
)

// A Go service serves a tensor; a client fetches it and shares the
// received memory with any DLPack consumer, here Go through dlpack.From.
func Example() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := dlflight.NewServer(dlflight.Options{Tokens: map[string]string{"secret": "alice"}})
	go s.Serve(lis)
	defer s.Shutdown()
	if err := s.Register("weights", dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})); err != nil {
		log.Fatal(err)
	}

	c, err := dlflight.Dial(lis.Addr().String(), dlflight.ClientOptions{Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	info, err := c.Info(context.Background(), "weights")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Name, info.DType, info.Shape, info.Bytes, "bytes")

	t, err := c.Get(context.Background(), "weights")
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	f, err := dlpack.From(t) // the received memory, shared
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	xs, _ := dlpack.Slice[float32](f)
	fmt.Println(f.Shape(), xs, "aligned:", t.Aligned())
	// Output:
	// weights float32 [2 3] 24 bytes
	// [2 3] [1 2 3 4 5 6] aligned: true
}
