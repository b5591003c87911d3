// Command flightserve is the Go side of make compare's Flight rows: it
// serves float32 tensors of 1, 64 and 256 MiB on a loopback port
// (plaintext; the port is the first line it prints) and, with -shm, first
// creates a 256 MiB float32 .npy file there with tensorfile.CreateNPY and
// fills it in place. Tensors are listed as endpoints of 16 MiB each. It
// stops when its standard input closes.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlflight"
	"github.com/godlpack/dlpack/tensorfile"
)

func main() {
	shm := flag.String("shm", "", "create and fill this 256 MiB .npy file")
	flag.Parse()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	// 16 MiB endpoints: 4 for the 64 MiB tensor, 16 for the 256 MiB one
	// (flight.py threads); a DoGet of the name sends it whole
	s := dlflight.NewServer(dlflight.Options{MaxMessageBytes: 512 << 20, EndpointBytes: 16 << 20})
	for _, sz := range []struct {
		name string
		rows int64
	}{{"1MiB", 256}, {"64MiB", 256 * 64}, {"256MiB", 256 * 256}} {
		xs := dlpack.AlignedSlice[float32](int(sz.rows) * 1024)
		for i := range xs {
			xs[i] = float32(i % 1000)
		}
		if err := s.Register(sz.name, dlpack.NewArray(xs, []int64{sz.rows, 1024})); err != nil {
			log.Fatal(err)
		}
	}
	if *shm != "" {
		f, err := tensorfile.CreateNPY(*shm, dlpack.Float32, []int64{256 * 256, 1024})
		if err != nil {
			log.Fatal(err)
		}
		t, err := dlpack.From(f.Tensors()[0], dlpack.RequireWritable())
		if err != nil {
			log.Fatal(err)
		}
		xs, err := dlpack.Slice[float32](t)
		if err != nil {
			log.Fatal(err)
		}
		for i := range xs {
			xs[i] = float32(i % 1000) // written in place: the file's pages
		}
		t.Close()
		f.Close()
	}
	fmt.Println(lis.Addr().(*net.TCPAddr).Port)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		s.Shutdown()
	}()
	if err := s.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
