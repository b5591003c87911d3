package tensorfile_test

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
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
			func(p string) (*tensorfile.File, error) { return tensorfile.OpenNPY(p) },
			func(p string) (*tensorfile.File, error) { return tensorfile.ReadNPY(p) },
		} {
			f, err := open(p)
			if errors.Is(err, dlpack.ErrCgoRequired) {
				continue // ReadNPY copies into a Buffer
			}
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

// A .npy header longer than NumPy's max_header_size (10,000 bytes) is
// refused before it is read, whatever the file's size: a file of 1 GiB
// claiming a 1 GiB header fails having allocated next to nothing.
// MaxNPYHeader raises the bound for trusted files, as NumPy's
// max_header_size does.
func TestNPYHeaderBound(t *testing.T) {
	noLiveMappings(t)
	const claimed = 1 << 30
	p := filepath.Join(t.TempDir(), "huge-header.npy")
	fd, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	pre := binary.LittleEndian.AppendUint32([]byte("\x93NUMPY\x02\x00"), claimed)
	_, err = fd.Write(append(pre, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"...))
	if err == nil {
		err = fd.Truncate(12 + claimed + 24) // sparse: no disk used
	}
	if err := errors.Join(err, fd.Close()); err != nil {
		t.Fatal(err)
	}
	opens := map[string]func(string, ...tensorfile.Option) (*tensorfile.File, error){"OpenNPY": tensorfile.OpenNPY, "ReadNPY": tensorfile.ReadNPY}
	for name, open := range opens {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := open(p)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), "header_len = 1073741824") || !strings.Contains(err.Error(), "10000-byte limit") {
			t.Errorf("%s: %v", name, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("%s allocated %d bytes to refuse the header", name, d)
		}
	}

	// A valid header padded to 20,020 bytes (the data 64-byte aligned):
	// refused by default, read with MaxNPYHeader(20_020), as NumPy reads
	// it with max_header_size=20020 only.
	data := make([]byte, 24)
	big := writeTemp(t, "big-header.npy", npyPadded(20_020, data))
	for name, open := range opens {
		if _, err := open(big); !errors.Is(err, tensorfile.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
		if _, err := open(big, tensorfile.MaxNPYHeader(20_019)); !errors.Is(err, tensorfile.ErrFormat) {
			t.Errorf("%s, MaxNPYHeader(20_019): %v, want ErrFormat", name, err)
		}
		f, err := open(big, tensorfile.MaxNPYHeader(20_020))
		if errors.Is(err, dlpack.ErrCgoRequired) {
			continue // ReadNPY copies into a Buffer
		}
		if err != nil {
			t.Fatalf("%s, MaxNPYHeader(20_020): %v", name, err)
		}
		if got := f.Tensors()[0].Shape(); !slices.Equal(got, []int64{3}) {
			t.Errorf("%s: shape %v", name, got)
		}
		f.Close()
	}
	t.Run("NumPy agrees", func(t *testing.T) {
		out := runPython(t, "-c", `
import sys, numpy as np
for kw in ({}, {"max_header_size": 20019}, {"max_header_size": 20020}):
    try:
        print(np.load(sys.argv[1], **kw).shape)
    except ValueError:
        print("refused")
`, big)
		if want := "refused\nrefused\n(3,)"; strings.TrimSpace(out) != want {
			t.Errorf("NumPy: %q, want %q", out, want)
		}
	})
}

// npyPadded is a valid .npy file (version 2.0, float64, shape (3,)) whose
// header is padded with spaces to hlen bytes.
func npyPadded(hlen int, data []byte) []byte {
	hdr := "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
	hdr += strings.Repeat(" ", hlen-len(hdr)-1) + "\n"
	b := binary.LittleEndian.AppendUint32([]byte("\x93NUMPY\x02\x00"), uint32(len(hdr)))
	return append(append(b, hdr...), data...)
}

// TestNPZHeaderBound: MaxNPYHeader reaches the members of an .npz, stored
// and deflated, as it does OpenNPY.
func TestNPZHeaderBound(t *testing.T) {
	f8x3 := make([]byte, 24)
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		p := writeTemp(t, "big.npz", npzBytes(map[string][]byte{"a.npy": npyPadded(10_001, f8x3)}, method))
		if _, err := tensorfile.OpenNPZ(p); !errors.Is(err, tensorfile.ErrFormat) {
			t.Fatalf("method %d: OpenNPZ with the default bound: %v, want ErrFormat", method, err)
		}
		f, err := tensorfile.OpenNPZ(p, tensorfile.MaxNPYHeader(20_000))
		if errors.Is(err, dlpack.ErrCgoRequired) {
			continue // a deflated or misaligned member is copied into a Buffer
		}
		if err != nil {
			t.Fatalf("method %d: OpenNPZ with MaxNPYHeader(20000): %v", method, err)
		}
		if got := f.Tensors()[0].Shape(); len(got) != 1 || got[0] != 3 {
			t.Errorf("method %d: shape %v, want [3]", method, got)
		}
		f.Close()
	}
}
