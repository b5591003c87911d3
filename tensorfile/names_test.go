package tensorfile_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// The tensors of a safetensors file of many tensors are listed in data
// order with their names, shapes and strides, and File.Tensor (whose
// index is built on first use) finds each of them from several
// goroutines at once.
func TestSafetensorsManyNames(t *testing.T) {
	noLiveMappings(t)
	const n = 2000
	f, err := tensorfile.OpenSafetensors(writeTemp(t, "names.safetensors", stBytes(modelHeader(n), make([]byte, n*64))))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := f.Tensors()
	if len(ts) != n {
		t.Fatalf("%d tensors", len(ts))
	}
	for i, tn := range ts {
		if want := fmt.Sprintf("model.layers.%d.mlp.weight_%d", i/10, i%10); tn.Name() != want || fmt.Sprint(tn.Shape(), tn.Strides()) != "[4 4] [4 1]" {
			t.Fatalf("tensor %d: %v %v %v, want %s", i, tn.Name(), tn.Shape(), tn.Strides(), want)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				if tn, err := f.Tensor(ts[i].Name()); err != nil || tn != ts[i] {
					t.Errorf("Tensor(%q): %v, %v", ts[i].Name(), tn, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, err := f.Tensor("model.layers.0.mlp.weight_10"); err == nil {
		t.Error("found a tensor the file does not hold")
	}
	// Shapes are copies: changing one changes no other tensor.
	s := ts[0].Shape()
	s[0] = 99
	if fmt.Sprint(ts[0].Shape(), ts[1].Shape()) != "[4 4] [4 4]" {
		t.Error("a tensor's shape changed")
	}
}
