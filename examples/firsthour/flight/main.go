// Command flight serves a 3x4 float32 tensor over Arrow Flight on
// loopback and runs the pyarrow.flight client of docs/beyond-one-process.md
// against it: usage flight PYTHON CLIENT.PY.
package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlflight"
)

func main() {
	xs := make([]float32, 12)
	for i := range xs {
		xs[i] = float32(i) / 2
	}
	s := dlflight.NewServer(dlflight.Options{})
	if err := s.Register("weights", dlpack.NewArray(xs, []int64{3, 4})); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go s.Serve(lis)
	cmd := exec.Command(os.Args[1], os.Args[2], lis.Addr().String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	s.Shutdown()
	if err != nil {
		log.Fatalf("the pyarrow client: %v", err)
	}
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}
