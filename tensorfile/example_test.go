//go:build cgo

package tensorfile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// Write a safetensors file, map it, and read one tensor without copying.
func ExampleOpenSafetensors() {
	path := filepath.Join(os.TempDir(), "example.safetensors")
	defer os.Remove(path)
	out, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	w := dlpack.NewArray([]float32{1, 2, 3, 4, 5, 6}, []int64{2, 3})
	err = tensorfile.WriteSafetensors(out, []tensorfile.Named{{Name: "w", Tensor: w}}, map[string]string{"format": "pt"})
	if err == nil {
		err = out.Close()
	}
	if err != nil {
		panic(err)
	}

	f, err := tensorfile.OpenSafetensors(path) // maps the file read-only
	if err != nil {
		panic(err)
	}
	defer f.Close()
	t, err := f.Tensor("w")
	if err != nil {
		panic(err)
	}
	x, err := dlpack.From(t) // a view of the mapping: nothing is read or copied
	if err != nil {
		panic(err)
	}
	defer x.Close() // the mapping stays until f and x are both closed
	xs, err := dlpack.ReadOnlySlice[float32](x)
	if err != nil {
		panic(err)
	}
	fmt.Println(t, xs, f.Metadata())
	// Output: "w" float32[2 3] mapped read-only [1 2 3 4 5 6] map[format:pt]
}
