package tensorfile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// python returns the interpreter with NumPy, ml_dtypes and safetensors
// (TENSORFILE_PYTHON, set by `make files`), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TENSORFILE_PYTHON")
	if py == "" {
		t.Skip("TENSORFILE_PYTHON is not set (make files sets it)")
	}
	return py
}

func runPython(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(python(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("python %v: %v\n%s", args, err, out)
	}
	return string(out)
}

type manifestEntry struct {
	File     string                    `json:"file"`
	Kind     string                    `json:"kind"`
	Writer   string                    `json:"writer,omitempty"`
	Members  map[string]manifestMember `json:"members"`
	Metadata map[string]string         `json:"metadata,omitempty"`
	STDTypes map[string]string         `json:"st_dtypes,omitempty"`
}

type manifestMember struct {
	Bin     string  `json:"bin"`
	Shape   []int64 `json:"shape"`
	DType   string  `json:"dtype"`
	Fortran bool    `json:"fortran"`
}

// wantType is the DLPack type of a NumPy dtype string of the manifest.
var wantType = map[string]dlpack.DataType{
	"|b1": dlpack.Bool, "|i1": dlpack.Int8, "<i2": dlpack.Int16, "<i4": dlpack.Int32, "<i8": dlpack.Int64,
	"|u1": dlpack.Uint8, "<u2": dlpack.Uint16, "<u4": dlpack.Uint32, "<u8": dlpack.Uint64,
	"<f2": dlpack.Float16, "<f4": dlpack.Float32, "<f8": dlpack.Float64, "<c8": dlpack.Complex64, "<c16": dlpack.Complex128,
	">f8": dlpack.Float64, ">i4": dlpack.Int32, ">c16": dlpack.Complex128, ">f2": dlpack.Float16, ">u8": dlpack.Uint64,
	"bfloat16": dlpack.BFloat16, "float8_e4m3fn": dlpack.Float8E4M3FN, "float8_e5m2": dlpack.Float8E5M2,
	"float8_e8m0fnu": dlpack.Float8E8M0FNU, "float8_e4m3fnuz": dlpack.Float8E4M3FNUZ, "float8_e5m2fnuz": dlpack.Float8E5M2FNUZ,
}

// Files written by NumPy and safetensors read in Go bit for bit.
func TestPeersWriteGoReads(t *testing.T) {
	noLiveMappings(t)
	dir := t.TempDir()
	t.Log(strings.TrimSpace(runPython(t, "testdata/peers.py", "write", dir)))
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []manifestEntry
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatal(err)
	}
	tensors, mapped, copied, lazy := 0, 0, 0, 0
	for _, e := range files {
		path := filepath.Join(dir, e.File)
		var f *tensorfile.File
		switch e.Kind {
		case "npy":
			f, err = tensorfile.OpenNPY(path)
		case "npy-big-endian":
			if _, err := tensorfile.OpenNPY(path); !errors.Is(err, tensorfile.ErrByteOrder) {
				t.Errorf("%s: OpenNPY: %v, want ErrByteOrder", e.File, err)
			}
			f, err = tensorfile.ReadNPY(path)
		case "npz":
			f, err = tensorfile.OpenNPZ(path)
		case "safetensors":
			f, err = tensorfile.OpenSafetensors(path)
		}
		if err != nil {
			t.Errorf("%s (%s): %v", e.File, e.Writer, err)
			continue
		}
		if e.Metadata != nil && !mapsEqual(f.Metadata(), e.Metadata) {
			t.Errorf("%s: metadata %v, want %v", e.File, f.Metadata(), e.Metadata)
		}
		if len(f.Tensors()) != len(e.Members) {
			t.Errorf("%s: %d tensors, want %d", e.File, len(f.Tensors()), len(e.Members))
		}
		for name, m := range e.Members {
			tn, err := f.Tensor(name)
			if err != nil {
				t.Errorf("%s: %v", e.File, err)
				continue
			}
			want, err := os.ReadFile(filepath.Join(dir, m.Bin))
			if err != nil {
				t.Fatal(err)
			}
			checkTensor(t, e.File+" "+name, tn, m, want, e.Kind == "npy-big-endian")
			tensors++
			if tn.Mapped() {
				mapped++
			} else {
				copied++
			}
			if e.Kind == "npy" && !tn.Mapped() {
				t.Errorf("%s: a .npy tensor was copied", e.File)
			}
			if e.Kind == "npz" && !tn.CRCChecked() {
				t.Errorf("%s %s: an .npz member (mapped %v) whose CRC was not checked", e.File, name, tn.Mapped())
			}
		}
		f.Close()
		if e.Kind == "npz" {
			lazy += readLazily(t, path, dir, e)
		}
	}
	t.Logf("%d tensors in %d files read bit for bit (%d mapped, %d copied); %d mapped .npz members read again opened with LazyMappedCRC, each checked on its first use",
		tensors, len(files), mapped, copied, lazy)
}

// readLazily opens an archive NumPy wrote with LazyMappedCRC and reads
// every member bit for bit: each mapped one is unchecked until its first
// export, and checked after it. It returns how many members were mapped.
func readLazily(t *testing.T, path, dir string, e manifestEntry) int {
	t.Helper()
	f, err := tensorfile.OpenNPZ(path, tensorfile.LazyMappedCRC())
	if err != nil {
		t.Errorf("%s, LazyMappedCRC: %v", e.File, err)
		return 0
	}
	defer f.Close()
	n := 0
	for name, m := range e.Members {
		tn, err := f.Tensor(name)
		if err != nil {
			t.Errorf("%s, LazyMappedCRC: %v", e.File, err)
			continue
		}
		if tn.Mapped() {
			n++
			if tn.CRCChecked() {
				t.Errorf("%s %s, LazyMappedCRC: checked before its first use", e.File, name)
			}
		}
		want, err := os.ReadFile(filepath.Join(dir, m.Bin))
		if err != nil {
			t.Fatal(err)
		}
		checkTensor(t, e.File+" "+name+" (LazyMappedCRC)", tn, m, want, false)
		if !tn.CRCChecked() {
			t.Errorf("%s %s, LazyMappedCRC: not checked after its first use", e.File, name)
		}
	}
	return n
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkTensor(t *testing.T, what string, tn *tensorfile.Tensor, m manifestMember, want []byte, copied bool) {
	t.Helper()
	if dt, ok := wantType[m.DType]; !ok || tn.DataType() != dt {
		t.Errorf("%s: dtype %v, want %s", what, tn.DataType(), m.DType)
	}
	if !slices.Equal(tn.Shape(), m.Shape) {
		t.Errorf("%s: shape %v, want %v", what, tn.Shape(), m.Shape)
	}
	if m.Fortran && len(m.Shape) > 1 && tn.Strides()[0] != 1 {
		t.Errorf("%s: Fortran order with strides %v", what, tn.Strides())
	}
	f, err := dlpack.From(tn)
	if err != nil {
		t.Errorf("%s: From: %v", what, err)
		return
	}
	defer f.Close()
	if f.Writable() != copied {
		t.Errorf("%s: writable %v (a read-only mapping must give read-only tensors, ReadNPY writable ones)", what, f.Writable())
	}
	got, err := tensorfile.RowMajor(f)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: bytes differ from the writer's", what)
	}
}
