//go:build cgo

package dlonnx_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	ort "github.com/yalue/onnxruntime_go"
)

// A tensor from elsewhere (here a Go array; an imported dlpack.Foreign
// works the same) goes into ONNX Runtime without a copy, and the result
// goes on to a DLPack consumer without a copy. (Not run by go test: it
// needs the ONNX Runtime library; make onnx runs the same steps.)
func Example() {
	ort.SetSharedLibraryPath(os.Getenv("ONNXRUNTIME_LIB"))
	if err := ort.InitializeEnvironment(); err != nil {
		fmt.Println(err)
		return
	}
	defer ort.DestroyEnvironment()
	s, err := ort.NewDynamicAdvancedSession("relu_float32.onnx", []string{"X"}, []string{"Y"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Destroy()

	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{-1, 2, -3, 4}, []int64{4})) // shares the array
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Destroy()
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{4}) // ORT writes the result here
	if err != nil {
		fmt.Println(err)
		return
	}
	defer y.Destroy()
	if err := s.Run([]ort.Value{x}, []ort.Value{y}); err != nil {
		fmt.Println(err)
		return
	}
	f, err := dlpack.From(y) // or dlpack.Produce(y, req) for C, pycapsule for Python
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	ys, _ := dlpack.Slice[float32](f)
	fmt.Println(ys) // [0 2 0 4]
}

// ToValue never copies: read-only memory is refused, and CopyToValue is
// the explicit copy.
func ExampleToValue_readOnly() {
	a := dlpack.NewArray([]float32{1, 2, 3}, []int64{3})
	a.ReadOnly = true
	_, err := dlonnx.ToValue(a)
	fmt.Println(errors.Is(err, dlpack.ErrReadOnly))
	// Output: true
}
