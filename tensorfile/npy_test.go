package tensorfile_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/godlpack/dlpack/tensorfile"
)

// Python 2 wrote the shape's dimensions as longs, (2L, 3L); NumPy reads
// them from 1.0 and 2.0 headers (with a warning) and refuses them in 3.0
// headers, which Python 2 never wrote. OpenNPY and ReadNPY do the same.
func TestNPYPython2Shape(t *testing.T) {
	noLiveMappings(t)
	data := []byte{0, 1, 2, 3, 4, 5}
	const hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (2L, 3L), }"
	ok := map[string]string{
		"1.0":               writeTemp(t, "py2.npy", npyVersion(1, hdr, data)),
		"2.0":               writeTemp(t, "py2.npy", npyVersion(2, hdr, data)),
		"1.0 one dimension": writeTemp(t, "py2.npy", npyVersion(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (6L,), }", data)),
	}
	for what, p := range ok {
		for _, open := range []func(string) (*tensorfile.File, error){
			func(p string) (*tensorfile.File, error) { return tensorfile.OpenNPY(p) }, tensorfile.ReadNPY,
		} {
			f, err := open(p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want := []int64{2, 3}
			if strings.Contains(what, "one") {
				want = []int64{6}
			}
			if got := f.Tensors()[0].Shape(); !slices.Equal(got, want) {
				t.Errorf("%s: shape %v, want %v", what, got, want)
			}
			f.Close()
		}
	}
	bad := map[string]string{
		"3.0":          writeTemp(t, "py2.npy", npyVersion(3, hdr, data)),
		"lower-case l": writeTemp(t, "py2.npy", npyVersion(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2l, 3l), }", data)),
		"L alone":      writeTemp(t, "py2.npy", npyVersion(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (L, 3L), }", data)),
	}
	for what, p := range bad {
		if _, err := tensorfile.OpenNPY(p); !errors.Is(err, tensorfile.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", what, err)
		}
	}

	t.Run("NumPy agrees", func(t *testing.T) {
		args := []string{"-W", "ignore", "-c", `
import sys, numpy as np
for p in sys.argv[1:]:
    try:
        print(np.load(p).shape)
    except Exception as e:
        print("refused", type(e).__name__)
`}
		for _, what := range []string{"1.0", "2.0", "1.0 one dimension", "3.0", "lower-case l", "L alone"} {
			if p, ok := ok[what]; ok {
				args = append(args, p)
			} else {
				args = append(args, bad[what])
			}
		}
		out := strings.Split(strings.TrimSpace(runPython(t, args...)), "\n")
		want := []string{"(2, 3)", "(2, 3)", "(6,)", "refused ValueError", "refused ValueError", "refused ValueError"}
		if !slices.Equal(out, want) {
			t.Errorf("NumPy: %q, want %q", out, want)
		}
	})
}
