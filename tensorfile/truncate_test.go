//go:build unix

package tensorfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// truncateFrom cuts the file at path to size bytes from another process
// (coreutils truncate), as a deployment tool replacing a file in place
// would.
func truncateFrom(t *testing.T, path string, size int) {
	t.Helper()
	if out, err := exec.Command("truncate", "-s", strconv.Itoa(size), path).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
}

// truncatingWriter truncates the file at its first Write: the writer is
// then in the middle of streaming the mapped tensor.
type truncatingWriter struct {
	t    *testing.T
	path string
	done bool
	n    int
}

func (w *truncatingWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		truncateFrom(w.t, w.path, 4096)
	}
	w.n += len(p)
	return len(p), nil
}

func wantTruncated(t *testing.T, what string, err error) {
	t.Helper()
	var fe *dlpack.FieldError
	if !errors.Is(err, tensorfile.ErrTruncated) || !errors.As(err, &fe) {
		t.Fatalf("%s: %v, want an error wrapping ErrTruncated", what, err)
	}
	t.Logf("%s: %v", what, err)
}

const bigN = 1 << 20 // float64 elements: 8 MiB, 8 of the writers' chunks

// The writers stream a mapped tensor through a guarded copy: the file
// truncated by another process while they read it gives ErrTruncated, and
// the process lives on. Compact (C order) and strided (Fortran order)
// sources; a File's Tensor and a Foreign of it; .npy, .npz, safetensors.
func TestWritersFileTruncatedMidRead(t *testing.T) {
	noLiveMappings(t)
	write := map[string]func(io.Writer, dlpack.Producer) error{
		"WriteNPY": tensorfile.WriteNPY,
		"WriteNPZ": func(w io.Writer, p dlpack.Producer) error {
			return tensorfile.WriteNPZ(w, []tensorfile.Named{{Name: "a", Tensor: p}}, false)
		},
		"WriteSafetensors": func(w io.Writer, p dlpack.Producer) error {
			return tensorfile.WriteSafetensors(w, []tensorfile.Named{{Name: "a", Tensor: p}}, nil)
		},
	}
	order := map[string]string{"C": "False", "Fortran": "True"}
	for wname, wfn := range write {
		for oname, fortran := range order {
			for _, viaForeign := range []bool{false, true} {
				name := wname + "/" + oname
				if viaForeign {
					name += "/Foreign"
				}
				t.Run(name, func(t *testing.T) {
					data := make([]byte, 8*bigN)
					path := writeTemp(t, "big.npy", npyBytes("{'descr': '<f8', 'fortran_order': "+fortran+", 'shape': (1024, 1024), }", data))
					f, err := tensorfile.OpenNPY(path)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					var src dlpack.Producer = f.Tensors()[0]
					if viaForeign {
						fo, err := dlpack.From(f.Tensors()[0])
						if err != nil {
							t.Fatal(err)
						}
						defer fo.Close()
						src = fo
					}
					w := &truncatingWriter{t: t, path: path}
					wantTruncated(t, name, wfn(w, src))
					if w.n >= 8*bigN {
						t.Errorf("%d bytes written: the whole tensor, after the truncation", w.n)
					}
				})
			}
		}
	}
}

// CopyTo is the guarded read for user code.
func TestCopyToFileTruncated(t *testing.T) {
	noLiveMappings(t)
	path := writeTemp(t, "big.npy", f64npy(bigN))
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn := f.Tensors()[0]
	dst := make([]byte, tn.NBytes())
	n, err := tn.CopyTo(dst[:4096])
	if err != nil || n != 4096 || !bytes.Equal(dst[8:16], f64npy(2)[len(f64npy(2))-8:]) {
		t.Fatalf("CopyTo before the truncation: %d, %v", n, err)
	}
	truncateFrom(t, path, 4096)
	n, err = tn.CopyTo(dst)
	wantTruncated(t, "CopyTo", err)
	// The error names the file's size now, and the bytes the tensor
	// needs: not an offset near the mapping's end.
	if msg := err.Error(); !strings.Contains(msg, "it is now 4096 bytes") || !strings.Contains(msg, fmt.Sprintf("bytes 128..%d of %s", 128+tn.NBytes(), path)) {
		t.Errorf("CopyTo: %v: want the file's size (4096) and the tensor's bytes", err)
	}
	if n != 0 {
		t.Errorf("CopyTo reports %d bytes on error", n)
	}
	f.Close()
	if _, err := tn.CopyTo(dst); !errors.Is(err, dlpack.ErrClosed) {
		t.Errorf("CopyTo after Close: %v", err)
	}
}

// ReadNPY and the copied members of OpenNPZ (deflated: decompressed and
// CRC-checked; stored but misaligned) read through the descriptor, not a
// mapping: a truncation between their header and data reads is a short
// read, ErrTruncated.
func TestDescriptorReadsFileTruncatedMidRead(t *testing.T) {
	noLiveMappings(t)
	defer tensorfile.SetHookBeforeData(nil)
	cases := map[string]struct {
		file []byte
		open func(string) (*tensorfile.File, error)
	}{
		"ReadNPY":            {f64npy(bigN), func(p string) (*tensorfile.File, error) { return tensorfile.ReadNPY(p) }},
		"OpenNPZ/deflated":   {npzBytes(map[string][]byte{"a.npy": f64npy(bigN)}, 8), openNPZ},
		"OpenNPZ/misaligned": {npzBytes(map[string][]byte{"a.npy": f64npy(bigN)}, 0), openNPZ},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeTemp(t, "f", c.file)
			hooked := false
			tensorfile.SetHookBeforeData(func() { hooked = true; truncateFrom(t, path, 4096) })
			f, err := c.open(path)
			if err == nil {
				f.Close()
			}
			if errors.Is(err, dlpack.ErrCgoRequired) {
				t.Skip("copies need cgo")
			}
			if !hooked {
				t.Fatal("the data was not copied through copyNPY")
			}
			wantTruncated(t, name, err)
		})
	}
}

func openNPZ(path string) (*tensorfile.File, error) { return tensorfile.OpenNPZ(path) }
