//go:build cgo

package tensorfile_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// A safetensors file whose header is not padded to 8 bytes (as written
// before the reference implementation padded it) is a valid file that
// safetensors itself reads: its misaligned tensors are read into a
// Buffer (Mapped false) and hand out the file's bytes, the aligned ones
// stay mapped. A writable mapping refuses them (ErrLayout): a copy would
// not write to the file.
func TestSafetensorsMisalignedHeader(t *testing.T) {
	noLiveMappings(t)
	js := `{"a":{"dtype":"F64","shape":[3],"data_offsets":[0,24]},"b":{"dtype":"U8","shape":[5],"data_offsets":[24,29]},"c":{"dtype":"F32","shape":[2],"data_offsets":[29,37]}}`
	if (8+len(js))%8 == 0 {
		t.Fatal("the header must leave the data misaligned")
	}
	var data []byte
	for _, v := range []float64{1.5, -2, math.Pi} {
		data = binary.LittleEndian.AppendUint64(data, math.Float64bits(v))
	}
	data = append(data, 1, 2, 3, 4, 5)
	for _, v := range []float32{7.25, -0.5} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	file = append(append(file, js...), data...)
	path := writeTemp(t, "unpadded.safetensors", file)
	want := map[string][]byte{"a": data[:24], "b": data[24:29], "c": data[29:37]}
	begin := map[string]int{"a": 0, "b": 24, "c": 29}

	f, err := tensorfile.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range f.Tensors() {
		base := 8 + len(js) + begin[tn.Name()]
		aligned := base%tn.DataType().ItemSize() == 0
		if tn.Mapped() != aligned {
			t.Errorf("%s at file offset %d: Mapped %v", tn.Name(), base, tn.Mapped())
		}
		g, err := dlpack.From(tn)
		if err != nil {
			t.Fatalf("%s: %v", tn.Name(), err)
		}
		got, first, err := dlpack.ReadOnlyBytes(g)
		if err != nil || !bytes.Equal(got[first:], want[tn.Name()]) {
			t.Errorf("%s: % x, %v; want % x", tn.Name(), got, err, want[tn.Name()])
		}
		if uintptr(unsafe.Pointer(&got[first]))%uintptr(tn.DataType().ItemSize()) != 0 {
			t.Errorf("%s: handed out misaligned", tn.Name())
		}
		g.Close()
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := tensorfile.OpenSafetensors(path, tensorfile.ReadWrite()); !errors.Is(err, tensorfile.ErrLayout) || !strings.Contains(err.Error(), `"a".data_offsets`) {
		t.Errorf("ReadWrite: %v, want ErrLayout naming a's offsets", err)
	}

	t.Run("safetensors reads it too", func(t *testing.T) {
		out := runPython(t, "-c", `
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="numpy") as f:
    for k in sorted(f.keys()):
        print(k, f.get_tensor(k).tobytes().hex())
`, path)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			name, hx, _ := strings.Cut(line, " ")
			if hx != hex.EncodeToString(want[name]) {
				t.Errorf("safetensors reads %s as %s", name, hx)
			}
		}
	})
}

// A .npy file whose header is not padded to 16 or 64 bytes (NumPy reads
// it) puts float64 data at file offset 68: the tensor is read into a
// Buffer (Mapped false, "copied"), its exports are aligned and flagged
// FlagIsCopied, and they hold what NumPy reads. A writable open refuses it.
func TestNPYMisalignedHeader(t *testing.T) {
	noLiveMappings(t)
	hdr := "{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}"
	hdr += strings.Repeat(" ", 68-10-len(hdr)-1) + "\n"
	file := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), 0)
	file = append(file, hdr...)
	if len(file) != 68 {
		t.Fatalf("data at %d, want 68", len(file))
	}
	var data []byte
	for _, v := range []float64{1.5, -2, math.Pi} {
		data = binary.LittleEndian.AppendUint64(data, math.Float64bits(v))
	}
	path := writeTemp(t, "unpadded.npy", append(file, data...))

	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn := f.Tensors()[0]
	if tn.Mapped() || !strings.Contains(tn.String(), "copied") {
		t.Errorf("%v: want a copy", tn)
	}
	for _, req := range []dlpack.Request{dlpack.Request{}, {MaxVersion: dlpack.CurrentVersion, Copy: dlpack.CopyNever}} {
		m, err := dlpack.Produce(tn, req)
		if err != nil {
			t.Fatal(err)
		}
		if m.Versioned.DLTensor.Data%8 != 0 || m.Versioned.Flags&dlpack.FlagIsCopied == 0 {
			t.Errorf("%+v: data %#x, flags %v: want 8-byte aligned, copied", req, m.Versioned.DLTensor.Data, m.Versioned.Flags)
		}
		g, err := m.Import()
		if err != nil {
			t.Fatal(err)
		}
		got, first, err := dlpack.ReadOnlyBytes(g)
		if err != nil || !bytes.Equal(got[first:], data) {
			t.Errorf("% x, %v; want % x", got, err, data)
		}
		g.Close()
	}
	if _, err := tensorfile.OpenNPY(path, tensorfile.ReadWrite()); !errors.Is(err, tensorfile.ErrLayout) || !strings.Contains(err.Error(), "offset 68") {
		t.Errorf("ReadWrite: %v, want ErrLayout naming offset 68", err)
	}

	t.Run("NumPy reads it too", func(t *testing.T) {
		out := runPython(t, "-c", `
import sys, numpy as np
print(np.load(sys.argv[1]).tobytes().hex())
`, path)
		if strings.TrimSpace(out) != hex.EncodeToString(data) {
			t.Errorf("NumPy reads %s", out)
		}
	})
}
