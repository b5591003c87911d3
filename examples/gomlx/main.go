// Command gomlx loads weights from a safetensors file into GoMLX through
// the dlgomlx bridge, runs a small model (a softmax layer) on GoMLX's
// pure-Go backend, simplego, and hands the result on through DLPack,
// saying what was shared and what was copied. The file is written here by
// tensorfile (the Python side by side, with safetensors, NumPy and JAX,
// is `make gomlx`); the consumer is dlpack.From, the same protocol
// NumPy's from_dlpack speaks. It ends with nothing outstanding:
//
//	go run ./examples/gomlx
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgomlx"
	"github.com/godlpack/dlpack/tensorfile"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func main() {
	dir, err := os.MkdirTemp("", "gomlx-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "layer.safetensors")
	write(path)

	backend, err := simplego.New("")
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Finalize()

	// The file is mapped; each tensor is copied once, into a simplego
	// buffer the execution reads in place.
	f, err := tensorfile.OpenSafetensors(path)
	if err != nil {
		log.Fatal(err)
	}
	var in []any
	for _, name := range []string{"x", "w", "b"} {
		t, err := f.Tensor(name)
		if err != nil {
			log.Fatal(err)
		}
		g, err := dlgomlx.ToTensor(t, backend)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-2s %-18v copied once into a simplego buffer\n", name, g.Shape())
		in = append(in, g)
	}
	f.Close()

	layer := func(x, w, b *graph.Node) *graph.Node {
		return graph.Softmax(graph.Add(graph.MatMul(x, w), graph.InsertAxes(b, 0)), -1)
	}
	exec, err := graph.NewExec(backend, layer)
	if err != nil {
		log.Fatal(err)
	}
	y, err := exec.Exec1(in...)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range in {
		t.(*tensors.Tensor).MustFinalizeAll()
	}

	// The result goes out without a copy: the consumer reads GoMLX's
	// buffer, read-only.
	e, err := dlgomlx.FromTensor(y)
	if err != nil {
		log.Fatal(err)
	}
	out, err := dlpack.From(e)
	if err != nil {
		log.Fatal(err)
	}
	probs, err := dlpack.ReadOnlySlice[float32](out)
	if err != nil {
		log.Fatal(err)
	}
	// This is what numpy.from_dlpack receives (make gomlx hands it to NumPy).
	fmt.Printf("result for NumPy: %s %v shared (the consumer reads GoMLX's buffer: %v), read-only %v, copied %v\n",
		out.DataType(), out.Shape(), out.DataAddr() == addr(y), !out.Writable(), e.Copied())
	for i := range 2 {
		fmt.Printf("  row %d: %.4f\n", i, probs[i*3:i*3+3])
	}
	// Finalize the result once the consumer is done with it.
	if err := dlgomlx.FinalizeAll(y); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("result finalized while a consumer reads it: deferred (still valid %v, exports %d)\n", y.Ok(), dlgomlx.Exports(y))
	out.Close()
	s := dlgomlx.ReadStats()
	fmt.Printf("bridge: %d shared, %d copies (%d bytes); result valid after the last consumer: %v\n",
		s.Shared, s.Copies, s.CopiedBytes, y.Ok())
	fmt.Printf("done: outstanding exports %d\n", dlpack.Outstanding())
}

// write stores the weights of a 4 -> 3 softmax layer and a batch of two.
func write(path string) {
	w, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	err = tensorfile.WriteSafetensors(w, []tensorfile.Named{
		{Name: "x", Tensor: dlpack.NewArray([]float32{1, 0, -1, 2, 0.5, 0.5, 0.5, 0.5}, []int64{2, 4})},
		{Name: "w", Tensor: dlpack.NewArray([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, []int64{4, 3})},
		{Name: "b", Tensor: dlpack.NewArray([]float32{0, 0.1, -0.1}, []int64{3})},
	}, nil)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		log.Fatal(err)
	}
}

// addr is where GoMLX keeps y's elements.
func addr(y *tensors.Tensor) uintptr {
	var a uintptr
	_ = y.ConstFlatData(func(flat any) { a = uintptr(reflect.ValueOf(flat).UnsafePointer()) })
	return a
}
